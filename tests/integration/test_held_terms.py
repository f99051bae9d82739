"""The keyword index of a narrow filter's units held in the query service
(`memora.retrieval.caches.filter_terms`) on real PostgreSQL: it follows every write, and ranks every
passing unit as BM25 in the database does."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from memora.basics.config import Settings
from memora.retrieval.arms.keyword import K1, B, KeywordIndex, or_query
from memora.retrieval.caches.filter_terms import FilterTerms
from memora.retrieval.filters import Filters, compile_filters
from memora.retrieval.types import SearchScope
from tests.integration.memory_support import store_memory, unit_vector
from tests.integration.test_search_filters import _store_pets

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 1, tzinfo=UTC)
DIM = 384
WORDS = ["lidar", "harbour", "violin", "pottery", "marathon", "garden", "robot", "sailing"]
QUESTIONS = [
    "Who builds the lidar robot?", "garden pottery and violin lessons",
    "the marathon in the harbour", "sailing robot garden harbour violin",
]  # fmt: skip


def _scope(agent_id: str, filters: dict[str, Any]) -> SearchScope:
    where = compile_filters(Filters.model_validate(filters), "m")
    return SearchScope("default", agent_id, ("world",), where)


def _exact(conn: Any, scope: SearchScope, filters: dict[str, Any], question: str) -> Any:
    """BM25 of every passing unit holding a query term, in PostgreSQL; and the query's stats."""
    index = KeywordIndex(ttl=0.001)
    stats = index.stats(conn, scope.agent_key, index.terms(conn, question))
    where = compile_filters(Filters.model_validate(filters), "v")
    lateral, params = index.lateral(stats)
    rows = conn.execute(
        f"""
        SELECT m.unit_id::text AS id, kw.bm25 FROM memory_search m
        JOIN memory_vectors v ON v.unit_id = m.unit_id CROSS JOIN LATERAL {lateral} kw
        WHERE v.agent_id = %(agent)s AND v.fact_type = ANY(%(types)s) {where.sql}
          AND m.search_vector @@ %(query)s::tsquery
        ORDER BY kw.bm25 DESC, m.unit_id LIMIT 50
        """,
        {**params, **scope.params, **where.params, "query": or_query(list(stats.idf))},
    ).fetchall()
    return [(r["id"], float(r["bm25"])) for r in rows], stats


def test_held_terms_follow_every_change(agent_conn: Any, pool: Any, agent_id: str) -> None:
    """Read whole from a filter's second search (`wanted`), then brought up to date on each
    read with what was written since (also by a transaction still open at the last read):
    units added, a unit's text changed (and nothing else: migration 0028); a unit that leaves
    the filter or the searchable units drops the entry, read whole again from the next search.
    More than `at_most` passing: not held, and not read again."""
    conn = agent_conn
    rng = np.random.default_rng(5)

    def memory(kind: str, words: list[str], db: Any = conn) -> uuid.UUID:
        vector = unit_vector(rng.standard_normal(DIM))
        when = START + timedelta(days=int(rng.integers(0, 300)))
        return store_memory(db, agent_id, vector, when, {"kind": kind}, " ".join(words) + ".")

    def sentence() -> list[str]:
        return [str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 6)))]

    talks = [memory("talk", sentence()) for _ in range(20)]
    for _ in range(20):
        memory("note", sentence())
    conn.commit()
    terms = FilterTerms(1 << 20, 600.0, at_most=30)
    talk = _scope(agent_id, {"kind": "talk"})
    assert [terms.wanted(talk), terms.wanted(talk), terms.wanted(talk)] == [False, True, False]
    assert terms.refreshed(conn, talk) is None
    terms.load(conn, talk)
    conn.commit()

    def agrees() -> int:
        with conn.transaction():
            held = terms.refreshed(conn, talk)
            assert held is not None
            for question in QUESTIONS:
                exact, stats = _exact(conn, talk, {"kind": "talk"}, question)
                ranked = held.best(stats.idf, stats.avgdl, 50, k1=K1, b=B)
                assert [str(u) for u, _ in ranked] == [u for u, _ in exact], question
                assert [s for _, s in ranked] == pytest.approx([s for _, s in exact], rel=1e-9)
        return held.count

    assert agrees() == 20
    with pool.connection() as other:  # committed after a read that began meanwhile
        memory("talk", ["lidar", "lidar", "violin"], other)
        assert agrees() == 20
        other.commit()
    assert agrees() == 21
    conn.execute(
        "UPDATE memory_units SET text = 'robot robot sailing lidar.' WHERE id = %s", (talks[0],)
    )
    conn.commit()
    assert agrees() == 21
    assert terms.reads == {"whole": 1, "changes": 4}
    conn.execute("UPDATE memory_units SET metadata = %s WHERE id = %s",
                 (Jsonb({"kind": "note"}), talks[1]))  # fmt: skip
    conn.commit()  # it leaves the filter: read whole again
    with conn.transaction():
        assert terms.refreshed(conn, talk) is None
    assert terms.wanted(talk)
    terms.load(conn, talk)
    assert agrees() == 20
    conn.execute("DELETE FROM memory_units WHERE id = %s", (talks[2],))
    conn.commit()
    with conn.transaction():
        assert terms.refreshed(conn, talk) is None
    assert terms.wanted(talk)
    terms.load(conn, talk)
    assert agrees() == 19
    assert terms.reads == {"whole": 3, "changes": 8}

    for _ in range(12):  # 31 pass now: more than 30
        memory("talk", sentence())
    conn.commit()
    with conn.transaction():
        assert terms.refreshed(conn, talk) is None
    assert not terms.wanted(talk)
    fresh = FilterTerms(1 << 20, 600.0, at_most=30)  # a filter too broad from the start
    fresh.load(conn, talk)  # counted, its units' lexemes not read
    assert fresh.reads == {"whole": 1, "changes": 0}
    assert fresh.refreshed(conn, talk) is None and not fresh.wanted(talk)


def test_a_narrow_filter_is_ranked_from_its_held_keyword_index(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str
) -> None:
    """A filter's second search reads its keyword index in the background; the next search's
    keyword retriever ranks every passing unit from it, the list PostgreSQL gave, and takes a
    unit written since as what changed."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.types import SearchParams

    _store_pets(inline_api, agent_id)  # 24 units, 8 by Chen
    embedder = get_embedder(settings.embedding_model)
    retriever = Retriever(settings, pool, embedder)
    chen = Filters.model_validate({"speaker": "Chen"})
    params = SearchParams(agent_id, "Which pet did Chen talk about at dinner?", filters=chen,
                          trace=True)  # fmt: skip

    def keyword() -> list[tuple[str, float]]:
        outcome = retriever.search(params)
        assert outcome.trace is not None
        return [(r["id"], r["score"]) for r in outcome.trace["paths"]["keyword"]["results"]]

    try:
        assert retriever.caches.terms is not None
        keyword()
        in_database = keyword()  # the filter's second search: read in the background
        deadline = time.monotonic() + 30
        while retriever.caches.terms.reads["whole"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert retriever.caches.terms.reads == {"whole": 1, "changes": 0}
        held = keyword()
        assert retriever.caches.terms.reads == {"whole": 1, "changes": 1}
        assert len(in_database) == 8
        assert [i for i, _ in held] == [i for i, _ in in_database]
        assert [s for _, s in held] == pytest.approx([s for _, s in in_database], abs=1e-6)
        item = {"content": "Chen talked about the ferret at dinner on day 30.",
                "metadata": {"scene": "s0", "turn": 30, "speaker": "Chen"}}  # fmt: skip
        body = {"agent_id": agent_id, "items": [item]}
        assert inline_api.post("/api/memories/batch", json=body).status_code == 200
        assert len(keyword()) == 9
        assert retriever.caches.terms.reads == {"whole": 1, "changes": 2}
    finally:
        retriever.close()
