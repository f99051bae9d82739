"""The read path's narrow tables and keyword retrieval on real PostgreSQL: `memory_search`
(migration 0005) and `memory_vectors` (0012: half-precision embeddings with the filter
columns) follow `memory_units`, as do the postings (0022), BM25 in SQL equals the formula, the
match budget keeps each term's strongest postings (the most recent among equals), and tsqueries
built from lexemes cannot be steered by their characters."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from memora.jobs import JOBS, JobContext, run_job
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from memora.retrieval.arms.keyword import K1, B, KeywordIndex, or_query
from memora.retrieval.filters import Filters, compile_filters
from memora.retrieval.types import SearchScope
from memora.store import terms

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 1, tzinfo=UTC)
WHEN = START


@pytest.fixture()
def conn(agent_conn: Any) -> Any:
    return agent_conn


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def _add(
    conn: Any,
    agent_id: str,
    text: str,
    day: int,
    embedded: bool = True,
    metadata: dict[str, Any] | None = None,
) -> uuid.UUID:
    unit = uuid.uuid4()
    when = START + timedelta(days=day)
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
        " mentioned_at, metadata) VALUES (%s, %s, %s, %s, 'world', %s, %s, %s)",
        (
            unit,
            agent_id,
            text,
            _vector(day) if embedded else None,
            when,
            when,
            Jsonb(metadata or {}),
        ),
    )
    return unit


def _search_rows(conn: Any, unit: uuid.UUID) -> list[dict[str, Any]]:
    return conn.execute(  # type: ignore[no-any-return]
        "SELECT agent_id, fact_type, search_vector::text AS v FROM memory_search"
        " WHERE unit_id = %s",
        (unit,),
    ).fetchall()


def test_the_keyword_table_follows_the_searchable_units(conn: Any, agent_id: str) -> None:
    pending = _add(conn, agent_id, "Alice adopted a puppy", 0, embedded=False)
    assert _search_rows(conn, pending) == []  # not embedded yet: not searchable
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (_vector(1), pending))
    assert _search_rows(conn, pending) == [
        {"agent_id": agent_id, "fact_type": "world", "v": "'adopt':2 'alic':1 'puppi':4"}
    ]
    conn.execute("UPDATE memory_units SET text = 'Bob sold a kayak' WHERE id = %s", (pending,))
    assert _search_rows(conn, pending)[0]["v"] == "'bob':1 'kayak':4 'sold':2"
    conn.execute("UPDATE memory_units SET embedding = NULL WHERE id = %s", (pending,))
    assert _search_rows(conn, pending) == []
    other = _add(conn, agent_id, "Chen plays chess", 2)
    assert len(_search_rows(conn, other)) == 1
    conn.execute("DELETE FROM memory_units WHERE id = %s", (other,))
    assert _search_rows(conn, other) == []
    conn.commit()


def _row(conn: Any, unit: uuid.UUID) -> dict[str, Any] | None:
    return conn.execute(  # type: ignore[no-any-return]
        "SELECT v.agent_id, v.fact_type, v.metadata, v.event_date, v.occurred_start,"
        " 1 - (v.embedding <=> m.embedding::halfvec) AS same,"
        " (v.embedding::vector <=> m.embedding) AS drift"
        " FROM memory_vectors v JOIN memory_units m ON m.id = v.unit_id WHERE v.unit_id = %s",
        (unit,),
    ).fetchone()


def test_the_vector_table_follows_the_searchable_units(conn: Any, agent_id: str) -> None:
    unit = uuid.uuid4()
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, fact_type, event_date, mentioned_at,"
        " metadata) VALUES (%s, %s, 'Alice adopted a puppy', 'world', %s, %s, %s)",
        (unit, agent_id, WHEN, WHEN, '{"scene": "s1"}'),
    )
    assert _row(conn, unit) is None  # not embedded yet: not searchable
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (_vector(1), unit))
    row = _row(conn, unit)
    assert row is not None
    assert (row["agent_id"], row["fact_type"], row["metadata"]) == (
        agent_id,
        "world",
        {"scene": "s1"},
    )
    assert row["drift"] < 1e-5  # cosine distance to the float4 embedding
    conn.execute(
        'UPDATE memory_units SET metadata = \'{"scene": "s2"}\', occurred_start = %s WHERE id = %s',
        (WHEN, unit),
    )
    row = _row(conn, unit)
    assert row is not None and row["metadata"] == {"scene": "s2"} and row["occurred_start"] == WHEN
    for status, searchable in (("forgotten", False), ("active", True), ("archived", False)):
        conn.execute(
            "UPDATE memory_units SET status = %s, status_at = now() WHERE id = %s",
            (status, unit),
        )
        assert (_row(conn, unit) is not None) is searchable, status
    conn.execute("UPDATE memory_units SET status = 'active' WHERE id = %s", (unit,))
    conn.execute("UPDATE memory_units SET embedding = NULL WHERE id = %s", (unit,))
    assert _row(conn, unit) is None
    other = uuid.uuid4()
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
        " mentioned_at) VALUES (%s, %s, 'Bob sold a kayak', %s, 'world', %s, %s)",
        (other, agent_id, _vector(2), WHEN, WHEN),
    )
    assert _row(conn, other) is not None  # embedded at insert
    conn.execute("DELETE FROM memory_units WHERE id = %s", (other,))
    assert _row(conn, other) is None
    conn.commit()


def test_bm25_in_sql_equals_the_formula(conn: Any, agent_id: str) -> None:
    texts = [
        "Alice took her kayak to the lake",
        "the lake was calm and the kayak glided, kayak after kayak",
        "Bob went to the market",
        "Alice and Bob cooked dinner by the lake house with friends from work",
        "nothing to see here",
    ]
    units = [_add(conn, agent_id, t, day) for day, t in enumerate(texts)]
    conn.commit()
    index = KeywordIndex(ttl=0.01)
    terms = index.terms(conn, "kayaks on the lake?")
    assert terms == ["kayak", "lake"]
    stats = index.stats(conn, agent_id, terms)
    assert (stats.n_docs, stats.df) == (5, {"kayak": 2, "lake": 3})
    ranked = index.search(
        conn, SearchScope("default", agent_id, ("world",)), stats=stats, limit=10, match_budget=100
    )

    vectors = {
        r["id"]: r["v"]
        for r in conn.execute(
            "SELECT unit_id AS id, search_vector AS v FROM memory_search WHERE agent_id = %s",
            (agent_id,),
        ).fetchall()
    }
    avgdl = sum(len(_lexemes(v)) for v in vectors.values()) / len(vectors)
    assert stats.avgdl == pytest.approx(avgdl)

    def expected(unit: uuid.UUID) -> float:
        lexemes = _lexemes(vectors[unit])
        total = 0.0
        for term in terms:
            tf = lexemes.get(term, 0)
            if tf:
                idf = math.log(1 + (5 - stats.df[term] + 0.5) / (stats.df[term] + 0.5))
                norm = K1 * (1 - B + B * len(lexemes) / avgdl)
                total += idf * tf * (K1 + 1) / (tf + norm)
        return total

    assert [u for u, _ in ranked] == [units[1], units[0], units[3]]
    for unit, score in ranked:
        assert score == pytest.approx(expected(unit))


def _lexemes(vector: str) -> dict[str, int]:
    """'kayak':3,5 'lake':2 → {kayak: 2, lake: 1} (tf = positions)."""
    out = {}
    for part in vector.split(" "):
        lexeme, _, positions = part.rpartition(":")
        out[lexeme.strip("'")] = len(positions.split(","))
    return out


def test_the_match_budget_keeps_the_most_recent_matches(conn: Any, agent_id: str) -> None:
    units = [_add(conn, agent_id, f"walked the dog, day {day}", day) for day in range(12)]
    conn.commit()
    index = KeywordIndex(ttl=0.01)
    stats = index.stats(conn, agent_id, index.terms(conn, "dog"))
    ranked = index.search(
        conn, SearchScope("default", agent_id, ("world",)), stats=stats, limit=50, match_budget=5
    )
    assert {u for u, _ in ranked} == set(units[-5:])  # equal weights: the newest


def test_the_match_budget_keeps_each_terms_strongest_postings(conn: Any, agent_id: str) -> None:
    """A common term's best postings are read, not its newest: the old short mentions of
    "kayak" outrank newer long ones, and a unit holding both terms keeps both weights."""
    filler = "with friends from the office after a long week of meetings and deadlines"
    short = [_add(conn, agent_id, f"kayak trip {day}", day) for day in range(3)]
    long = [_add(conn, agent_id, f"kayak trip {day} {filler}", 10 + day) for day in range(6)]
    both = _add(conn, agent_id, "lidar kayak", 1)
    conn.commit()
    index = KeywordIndex(ttl=0.01)
    stats = index.stats(conn, agent_id, index.terms(conn, "lidar kayak"))
    scope = SearchScope("default", agent_id, ("world",))
    ranked = index.search(conn, scope, stats=stats, limit=50, match_budget=4)
    assert ranked[0][0] == both
    assert {u for u, _ in ranked} == {both, *short}
    exact = dict(index.search(conn, scope, stats=stats, limit=50, match_budget=100))
    assert set(exact) == {both, *short, *long}
    for unit, score in ranked:  # the weights read are summed exactly
        assert score == pytest.approx(exact[unit])


def test_a_broad_filter_is_checked_against_the_best_scored_units(conn: Any, agent_id: str) -> None:
    """Under a filter most units pass, the postings' best-scored units are checked against it
    by key: the same units and scores as the narrow filters' way (the filter first, then BM25
    of each match), and with a short list, its best that pass."""
    ann, bob = {"speaker": "Ann"}, {"speaker": "Bob"}
    filler = "with friends from the office after a long week of meetings and deadlines"
    short = [_add(conn, agent_id, f"kayak trip {day}", day, metadata=ann) for day in range(3)]
    failing = _add(conn, agent_id, "kayak trip", 5, metadata=bob)  # the strongest "kayak"
    long = [
        _add(conn, agent_id, f"kayak trip {day} {filler}", 10 + day, metadata=ann)
        for day in range(6)
    ]
    both = _add(conn, agent_id, "lidar kayak", 1, metadata=ann)
    conn.commit()
    filters = Filters.model_validate({"speaker": "Ann"})
    scope = SearchScope(
        "default",
        agent_id,
        ("world",),
        compile_filters(filters, "m"),
        compile_filters(filters, "memory_search"),
    )
    index = KeywordIndex(ttl=0.01)
    stats = index.stats(conn, agent_id, index.terms(conn, "lidar kayak"))

    def search(limit: int, share: float) -> list[tuple[uuid.UUID, float]]:
        return index.search(conn, scope, stats=stats, limit=limit, match_budget=100, share=share)

    narrow, broad = dict(search(50, share=0.1)), search(50, share=0.9)
    assert set(narrow) == {both, *short, *long}
    assert dict(broad) == pytest.approx(narrow)
    assert [u for u, _ in broad] == sorted(narrow, key=lambda u: (-narrow[u], str(u)))
    # the best 5 are checked (3 · 1.25 / 0.9): the "lidar kayak" unit, the failing one, the
    # short ones; the best 3 that pass are kept
    unfiltered = SearchScope("default", agent_id, ("world",))
    best = index.search(conn, unfiltered, stats=stats, limit=5, match_budget=100)
    assert {u for u, _ in best} == {both, failing, *short}
    kept = search(3, share=0.9)
    assert kept[0][0] == both and len(kept) == 3 and {u for u, _ in kept} < {both, *short}
    for unit, score in kept:
        assert score == pytest.approx(narrow[unit])


def _postings(conn: Any, agent_id: str) -> set[tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT unit_id, lexeme, fact_type, event_date, tf, dl FROM memory_postings"
        " WHERE agent_id = %s",
        (agent_id,),
    ).fetchall()
    return {tuple(r.values()) for r in rows}


def _postings_of_search_rows(conn: Any, agent_id: str) -> set[tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT s.unit_id, t.lexeme, s.fact_type, s.event_date,"
        " coalesce(array_length(t.positions, 1), 1) AS tf, length(s.search_vector) AS dl"
        " FROM memory_search s, unnest(s.search_vector) t WHERE s.agent_id = %s",
        (agent_id,),
    ).fetchall()
    return {tuple(r.values()) for r in rows}


def test_the_postings_follow_every_change(conn: Any, agent_id: str) -> None:
    """memory_postings (migration 0022) equals the postings of memory_search after every kind
    of write (`_write_every_way`)."""
    units = _write_every_way(conn, agent_id)
    expected = _postings_of_search_rows(conn, agent_id)
    pairs = {(p[0], p[1]) for p in expected}
    assert (units[3], "kayak") in pairs and (units[2], "kayak") not in pairs  # edited away
    assert not any(p[0] in (units[1], units[4]) for p in expected)
    assert _postings(conn, agent_id) == expected
    impacts = conn.execute(
        "SELECT lexeme, tf, impact FROM memory_postings WHERE unit_id = %s", (units[0],)
    ).fetchall()
    assert {r["lexeme"]: r["tf"] for r in impacts} == {"alic": 1, "adopt": 1, "puppi": 1}
    dl = 3
    weight = 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * dl / 12))
    assert all(r["impact"] == pytest.approx(weight) for r in impacts)


@pytest.mark.parametrize(
    "lexemes",
    [["o'neil"], ["back\\slash", "a|b"], ["x:*", "!not", "(paren)", "a&b", "c <-> d", "''"]],
)
def test_or_query_matches_each_lexeme_literally(conn: Any, lexemes: list[str]) -> None:
    query = or_query(lexemes)
    row = conn.execute("SELECT numnode(%s::tsquery) AS nodes", (query,)).fetchone()
    assert row["nodes"] == 2 * len(lexemes) - 1  # n lexemes joined by n - 1 ORs
    for lexeme in lexemes:
        alone = conn.execute(
            "SELECT array_to_tsvector(ARRAY[%s]) @@ %s::tsquery AS hit", (lexeme, query)
        ).fetchone()
        assert alone["hit"], lexeme
    other = conn.execute(
        "SELECT array_to_tsvector(ARRAY['unrelated']) @@ %s::tsquery AS hit", (query,)
    ).fetchone()
    assert not other["hit"]


def test_a_new_word_matches_before_its_cached_counts_expire(conn: Any, agent_id: str) -> None:
    _add(conn, agent_id, "walked the dog", 0)
    conn.commit()
    index = KeywordIndex(ttl=300)
    terms = index.terms(conn, "zeppelin dog")
    assert index.stats(conn, agent_id, terms).df == {"dog": 1, "zeppelin": 0}
    unit = _add(conn, agent_id, "saw a zeppelin over the bay", 1)
    conn.commit()
    stats = index.stats(conn, agent_id, terms)  # still the cached counts
    assert stats.df["zeppelin"] == 0
    ranked = index.search(
        conn, SearchScope("default", agent_id, ("world",)), stats=stats, limit=10, match_budget=1000
    )
    assert unit in {u for u, _ in ranked}


def _write_every_way(conn: Any, agent_id: str) -> list[uuid.UUID]:
    """Five units written, then an edit, an un-embedding, a change of network, a delete, an
    update of the keyword rows' dates only and a COPY of two more; committed. The five."""
    units = [_add(conn, agent_id, text, day) for day, text in enumerate(
        ["Alice adopted a puppy", "the puppy chewed a shoe, puppy!", "Bob sold his kayak",
         "Alice and Bob went kayaking", "a new shoe for Alice"]
    )]  # fmt: skip
    conn.execute("UPDATE memory_units SET text = 'Bob sold a canoe' WHERE id = %s", (units[2],))
    conn.execute("UPDATE memory_units SET embedding = NULL WHERE id = %s", (units[1],))
    conn.execute("UPDATE memory_units SET fact_type = 'agent' WHERE id = %s", (units[3],))
    conn.execute("DELETE FROM memory_units WHERE id = %s", (units[4],))
    conn.execute(
        "UPDATE memory_search SET event_date = event_date + interval '1 day' WHERE agent_id = %s",
        (agent_id,),
    )
    with conn.cursor().copy(
        "COPY memory_units (id, agent_id, text, embedding, fact_type, event_date, mentioned_at)"
        " FROM STDIN"
    ) as copy:
        for day, text in ((7, "Chen plays chess with Alice"), (8, "Chen's puppy")):
            when = START + timedelta(days=day)
            copy.write_row((uuid.uuid4(), agent_id, text, _vector(day), "world", when, when))
    conn.commit()
    return units


def _true_counts(conn: Any, agent_id: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT t.lexeme, count(*) AS n FROM memory_search s, unnest(s.search_vector) t "
        "WHERE s.agent_id = %s GROUP BY t.lexeme",
        (agent_id,),
    ).fetchall()
    n = conn.execute("SELECT count(*) AS n FROM memory_search WHERE agent_id = %s", (agent_id,))
    return {r["lexeme"]: r["n"] for r in rows} | {terms.DOCUMENTS: n.fetchone()["n"]}


def _counted(conn: Any, agent_id: str, truth: dict[str, int]) -> dict[str, int]:
    lexemes = sorted({*truth, "never", "kayak"} - {terms.DOCUMENTS})  # two that no row holds
    return {t: n for t, n in terms.frequencies(conn, agent_id, lexemes).items() if n}


def test_the_term_counts_follow_every_change_and_survive_folding(
    conn: Any, agent_id: str, settings: Any, pool: Any
) -> None:
    """memory_terms (migration 0020) equals a count over memory_search after every kind of
    write (`_write_every_way`), before the term_counts job folds it and after, while new
    deltas keep arriving."""
    _write_every_way(conn, agent_id)
    truth = _true_counts(conn, agent_id)
    assert truth["alic"] == 3 and truth[terms.DOCUMENTS] == 5
    assert _counted(conn, agent_id, truth) == truth

    job = JOBS["term_counts"]
    ctx = JobContext(settings, pool, InlineBackend(Pipeline(settings, pool)), agent_key=agent_id)
    result = run_job(job, ctx)
    assert result.details["agents"] == 1 and result.details["rows_written"] == len(truth)
    assert _counted(conn, agent_id, truth) == truth
    folded = conn.execute(
        "SELECT count(*) AS n, bool_and(compacted) AS all_folded FROM memory_terms "
        "WHERE agent_id = %s",
        (agent_id,),
    ).fetchone()
    assert folded == {"n": len(truth), "all_folded": True}

    _add(conn, agent_id, "Alice found the shoe", 9)  # deltas after folding add up too
    conn.commit()
    truth = _true_counts(conn, agent_id)
    assert _counted(conn, agent_id, truth) == truth
    assert run_job(job, ctx).details["rows_written"] == 4  # alic, found, shoe and N
    assert run_job(job, ctx).details == {
        "agents": 0,
        "rows_folded": 0,
        "rows_written": 0,
        "removals_dropped": 0,
    }
    assert _counted(conn, agent_id, truth) == truth


def test_the_keyword_statistics_come_from_the_term_counts(conn: Any, agent_id: str) -> None:
    for day in range(4):
        _add(conn, agent_id, f"the lidar survey number {day}", day)
    _add(conn, agent_id, "a quiet day", 5)
    conn.commit()
    index = KeywordIndex(ttl=300)
    stats = index.stats(conn, agent_id, index.terms(conn, "lidar quiet"))
    assert (stats.n_docs, stats.df) == (5, {"lidar": 4, "quiet": 1})
    assert stats.idf["quiet"] == pytest.approx(math.log(1 + (5 - 1 + 0.5) / 1.5))
