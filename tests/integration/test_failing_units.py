"""The units failing a broad filter held in the query service (`caches.failing_units`) on
real PostgreSQL: they follow every write, and the keyword, graph and entity retrievers give
with them what they give checking the filter by key."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from memora.basics.config import Settings
from memora.retrieval.caches.failing_units import Failing, FailingUnits
from memora.retrieval.filters import Filters, Matching, UnitSet, compile_filters
from memora.retrieval.types import SearchScope
from tests.integration.memory_support import store_memory, unit_vector
from tests.integration.test_search_filters import _store_pets

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 1, tzinfo=UTC)
DIM = 384


def _text(held: Failing | None) -> frozenset[str] | None:
    """The failing units' ids as text (None: not held)."""
    return None if held is None else held.members.text


def _scope(agent_id: str, filters: dict[str, Any]) -> SearchScope:
    where = compile_filters(Filters.model_validate(filters), "m")
    return SearchScope("default", agent_id, ("world",), where)


def _truly_failing(conn: Any, scope: SearchScope) -> set[str]:
    """The agent's searchable units a WHERE clause with the filter leaves out."""
    rows = conn.execute(
        f"SELECT unit_id::text AS id FROM memory_vectors m WHERE m.agent_id = %(agent)s "
        f"EXCEPT SELECT unit_id::text FROM memory_vectors m WHERE m.agent_id = %(agent)s "
        f"{scope.where.sql}",
        {"agent": scope.agent_key, **scope.where.params},
    ).fetchall()
    return {r["id"] for r in rows}


def test_failing_units_follow_every_change(agent_conn: Any, pool: Any, agent_id: str) -> None:
    """Read whole from a filter's second search (`wanted`), then brought up to date on each
    read with what was written since (also by a transaction still open at the last read):
    units added, moved into the filter or out of it; a unit no longer searchable may stay
    (nothing returns it). A unit the filter's range cannot judge (no such key) fails, as in
    a WHERE clause. More than `at_most` failing: not held, and not read again."""
    conn = agent_conn
    rng = np.random.default_rng(3)

    def memory(metadata: dict[str, Any], day: int, db: Any = conn) -> uuid.UUID:
        vector = unit_vector(rng.standard_normal(DIM))
        return store_memory(db, agent_id, vector, START + timedelta(days=day), metadata, "m")

    units = [memory({"kind": "talk", "turn": d}, d) for d in range(30)]
    odd = [memory({"kind": "note", "turn": 100 + d}, 30 + d) for d in range(3)]
    keyless = memory({"kind": "talk"}, 40)
    conn.commit()
    failing = FailingUnits(1 << 20, 600.0, at_most=10)
    talk, turns = _scope(agent_id, {"kind": "talk"}), _scope(agent_id, {"turn": {"lt": 100}})
    assert [failing.wanted(talk), failing.wanted(talk), failing.wanted(talk)] == [
        False, True, False  # noted; read now; being read
    ]  # fmt: skip
    assert failing.refreshed(conn, talk) is None
    failing.load(conn, talk)
    conn.commit()

    def agrees(scope: SearchScope) -> frozenset[str]:
        with conn.transaction():
            held = _text(failing.refreshed(conn, scope))
            truth = _truly_failing(conn, scope)
        assert held is not None and truth <= held
        searchable = {
            r["id"]
            for r in conn.execute(
                "SELECT unit_id::text AS id FROM memory_vectors WHERE agent_id = %s", (agent_id,)
            ).fetchall()
        }
        assert not (held - truth) & searchable  # what is held beyond the truth is gone
        return held

    assert agrees(talk) == {str(u) for u in odd}
    with pool.connection() as other:  # committed after a read that began meanwhile
        late = memory({"kind": "note"}, 50, other)
        assert str(late) not in agrees(talk)
        other.commit()
    assert str(late) in agrees(talk)
    conn.execute(
        "UPDATE memory_units SET metadata = %s WHERE id = %s", (Jsonb({"kind": "talk"}), odd[0])
    )
    conn.execute(
        "UPDATE memory_units SET metadata = %s WHERE id = %s", (Jsonb({"kind": "note"}), units[0])
    )
    conn.commit()  # one into the filter, one out of it
    held = agrees(talk)
    assert str(odd[0]) not in held and str(units[0]) in held
    conn.execute("UPDATE memory_units SET status = 'forgotten' WHERE id = %s", (odd[1],))
    conn.execute("DELETE FROM memory_units WHERE id = %s", (units[1],))
    conn.commit()
    agrees(talk)
    assert failing.reads == {"whole": 1, "changes": 5}

    failing.wanted(turns)
    assert failing.wanted(turns)
    failing.load(conn, turns)
    assert str(keyless) in agrees(turns)  # no turn: the range fails it

    for _ in range(8):  # 3 + 8 notes now fail: more than 10
        memory({"kind": "note"}, 60)
    conn.commit()
    with conn.transaction():
        assert failing.refreshed(conn, talk) is None
    assert failing.refreshed(conn, talk) is None and not failing.wanted(talk)
    with conn.transaction():
        failing.load(conn, talk)  # read whole: still too many
    assert failing.refreshed(conn, talk) is None


def test_a_broad_filter_in_use_is_read_whole_again_after_the_ttl(
    agent_conn: Any, agent_id: str
) -> None:
    """A filter searched again and again is read whole once the TTL has passed since its last
    whole read (each read of what changed refreshes the cache's own expiry): `refreshed` then
    has nothing, and the next search reads it (`wanted`), dropping units removed since."""
    conn = agent_conn
    rng = np.random.default_rng(19)
    units = [
        store_memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)),
                     START + timedelta(days=d), {"kind": "talk" if d else "note"}, "m")
        for d in range(4)
    ]  # fmt: skip
    conn.commit()
    clock = [0.0]
    failing = FailingUnits(1 << 20, 0.6, clock=lambda: clock[0])
    talk = _scope(agent_id, {"kind": "talk"})
    failing.wanted(talk)
    assert failing.wanted(talk)
    failing.load(conn, talk)
    conn.execute("DELETE FROM memory_units WHERE id = %s", (units[0],))
    conn.commit()
    for _ in range(2):
        clock[0] += 0.25
        with conn.transaction():
            assert _text(failing.refreshed(conn, talk)) == {str(units[0])}  # kept till then
    clock[0] += 0.25
    with conn.transaction():
        assert failing.refreshed(conn, talk) is None
    assert failing.wanted(talk)
    failing.load(conn, talk)
    with conn.transaction():
        assert _text(failing.refreshed(conn, talk)) == frozenset()
    assert failing.reads == {"whole": 2, "changes": 3}


def test_links_kept_to_units_not_failing_match_the_check_by_key(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """Each unit's strongest `fanout` links to passing units, from its strongest links with
    the failing ones dropped (read further where more of them failed than FAILING_SLACK), are
    the links the check in the database keeps."""
    from memora.retrieval.arms import graph

    _store_pets(inline_api, agent_id)
    for kept in ({"speaker": "Chen"}, {"speaker": ["Alice", "Bob"]}):
        scope = _scope(agent_id, kept)
        with pool.tenant_connection("default") as conn:
            failing = UnitSet.of(_truly_failing(conn, scope))
            ids = [
                r["id"]
                for r in conn.execute(
                    "SELECT id::text AS id FROM memory_units WHERE agent_id = %s", (agent_id,)
                ).fetchall()
            ]
            for fanout in (1, 2, 4):
                checked = graph.neighbours(conn, ids, fanout=fanout, where=scope.where)
                known = graph.neighbours(
                    conn, ids, fanout=fanout, where=scope.where,
                    matching=Matching(failing=failing),
                )  # fmt: skip
                assert known == checked, (kept, fanout)
        assert any(len(edges) == 4 for edges in checked.values())


def test_a_broad_filter_is_checked_against_the_units_held_as_failing(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str, monkeypatch: Any
) -> None:
    """A broad filter's second search reads its failing units in the background; from then on
    their count stands for the planner's estimates, the semantic retriever walks without the
    filter and drops them, and the keyword, graph and entity retrievers check against them,
    not by key: the same lists and hits; a failing unit written since is read as what
    changed."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.arms import exact
    from memora.retrieval.types import SearchParams

    _store_pets(inline_api, agent_id)  # 24 units, 16 by Alice or Bob: a broad filter
    monkeypatch.setattr(exact, "EXACT_SCAN_CAP", 3)  # walked, not ranked exactly
    monkeypatch.setattr(exact, "_estimate", lambda _c, _s, where: 16.0 if where.sql else 24.0)
    embedder = get_embedder(settings.embedding_model)
    retriever = Retriever(settings.model_copy(update={"filter_exact_scan_max": 2}), pool, embedder)
    speakers = Filters.model_validate({"speaker": ["Alice", "Bob"]})
    params = SearchParams(
        agent_id, "Which pet did Bob talk about at dinner?", filters=speakers, trace=True
    )
    with pool.tenant_connection("default") as conn:
        failing = _truly_failing(conn, SearchScope.of(params))
    assert len(failing) == 8

    def search() -> tuple[list[str], dict[str, list[tuple[str, float]]]]:
        outcome = retriever.search(params)
        assert outcome.trace is not None
        paths = {
            name: [(r["id"], r["score"]) for r in path["results"]]
            for name, path in outcome.trace["paths"].items()
        }
        for name, found in paths.items():
            assert not {i for i, _ in found} & failing, name
        return [str(h.id) for h in outcome.hits], paths

    try:
        assert retriever.caches.failing is not None
        search()
        hits, by_key = search()  # the filter's second search: read in the background
        deadline = time.monotonic() + 30
        while retriever.caches.failing.reads["whole"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert retriever.caches.failing.reads == {"whole": 1, "changes": 0}

        def unplanned(*_: Any) -> float:
            raise AssertionError("the held count stands for the planner's estimates")

        monkeypatch.setattr(exact, "_estimate", unplanned)
        held_hits, held = search()
        assert retriever.caches.failing.reads == {"whole": 1, "changes": 1}
        assert held_hits == hits
        assert by_key["keyword"] and by_key["graph"]
        for name in ("semantic", "keyword", "graph", "entity"):
            assert [i for i, _ in held.get(name, [])] == [i for i, _ in by_key.get(name, [])]
            assert [s for _, s in held.get(name, [])] == pytest.approx(
                [s for _, s in by_key.get(name, [])], abs=1e-6
            )
        item = {"content": "Chen talked about the ferret at dinner on day 30.",
                "metadata": {"scene": "s0", "turn": 30, "speaker": "Chen"}}  # fmt: skip
        body = {"agent_id": agent_id, "items": [item]}
        assert inline_api.post("/api/memories/batch", json=body).status_code == 200
        with pool.tenant_connection("default") as conn:
            failing = _truly_failing(conn, SearchScope.of(params))
        assert len(failing) == 9
        search()  # checks the new unit's absence from every path
        assert retriever.caches.failing.reads == {"whole": 1, "changes": 2}
    finally:
        retriever.close()


def test_the_keyword_retriever_reads_further_when_more_of_the_best_fail(
    settings: Settings, pool: Any, agent_conn: Any, agent_id: str, monkeypatch: Any
) -> None:
    """With a broad filter's failing units held, the keyword retriever takes as many of the
    unfiltered best as the share makes enough (`broad_count`); where more of them fail (here
    the 60 best-scored), it reads further: the 50 best that pass, as ranking those alone
    gives them."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.arms import exact
    from memora.retrieval.arms.keyword import KeywordIndex
    from memora.retrieval.filters import broad_count
    from memora.retrieval.types import SearchParams

    conn, rng = agent_conn, np.random.default_rng(5)
    filler = "on the walk home after a long day at the office with the whole team"

    def memory(text: str, speaker: str, day: int) -> None:
        vector = unit_vector(rng.standard_normal(DIM))
        store_memory(conn, agent_id, vector, START + timedelta(days=day), {"speaker": speaker},
                     text)  # fmt: skip

    for day in range(60):  # the best-scored "ferret" units (short), failing the filter
        memory(f"the ferret {day}", "Chen", day)
    for day in range(60):  # weaker matches that pass
        memory(f"a ferret {day} {filler}", "Alice", 100 + day)
    for day in range(100):  # no match, passing: 160 of 220 pass, a broad filter
        memory(f"a parrot {day} {filler}", "Bob", 200 + day)
    conn.commit()
    monkeypatch.setattr(exact, "EXACT_SCAN_CAP", 3)  # walked, not ranked exactly
    monkeypatch.setattr(exact, "_estimate", lambda _c, _s, where: 160.0 if where.sql else 220.0)
    embedder = get_embedder(settings.embedding_model)
    retriever = Retriever(settings.model_copy(update={"filter_exact_scan_max": 2}), pool, embedder)
    retriever.caches.terms = (
        None  # so few units: their keyword index would be held and ranked whole
    )
    filters = Filters.model_validate({"speaker": ["Alice", "Bob"]})
    params = SearchParams(agent_id, "Tell me about the ferret", filters=filters, trace=True)
    scope = SearchScope.of(params)
    failing = _truly_failing(conn, scope)
    assert len(failing) == 60 and broad_count(50, 160 / 220, 60) < 50 + 60

    def keyword() -> list[tuple[str, float]]:
        outcome = retriever.search(params)
        assert outcome.trace is not None
        return [(r["id"], r["score"]) for r in outcome.trace["paths"]["keyword"]["results"]]

    try:
        assert retriever.caches.failing is not None
        keyword()
        keyword()  # the filter's second search: its failing units read in the background
        deadline = time.monotonic() + 30
        while retriever.caches.failing.reads["whole"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert retriever.caches.failing.reads["whole"] == 1
        found = keyword()
        assert retriever.caches.failing.reads["changes"] >= 1  # the held units were used
    finally:
        retriever.close()
    index = KeywordIndex()
    stats = index.stats(conn, agent_id, index.terms(conn, params.query))
    unfiltered = SearchScope("default", agent_id, ("world",))
    best = index.best(conn, unfiltered, stats=stats, count=500, match_budget=1000)
    truth = [(str(u), score) for u, score in best if str(u) not in failing][:50]
    assert len(found) == 50 and not {u for u, _ in found} & failing
    assert [u for u, _ in found] == [u for u, _ in truth]
    assert [s for _, s in found] == pytest.approx([s for _, s in truth], abs=1e-6)


def test_a_broad_filter_walked_without_it_drops_the_failing_units(
    agent_conn: Any, agent_id: str
) -> None:
    """With the failing units known, the semantic retriever walks without the filter and drops
    them: the filtered walk's list, whether the nearest units fail (more than the share
    expected: the filtered walk follows) or not."""
    from memora.retrieval.arms import semantic

    conn = agent_conn
    rng = np.random.default_rng(23)
    query = unit_vector(rng.standard_normal(DIM))
    for d in range(40):  # the ten nearest fail, the rest pass
        near = 3.0 if d < 10 else 0.5
        vector = unit_vector(rng.standard_normal(DIM) + near * query)
        kind = "note" if d < 10 else "talk"
        store_memory(conn, agent_id, vector, START + timedelta(days=d), {"kind": kind}, "m")
    conn.commit()
    talk = _scope(agent_id, {"kind": "talk"})
    failing = UnitSet.of(_truly_failing(conn, talk))
    assert len(failing) == 10

    def nearest(limit: int, matching: Matching | None) -> list[Any]:
        with conn.transaction():
            return semantic.nearest(
                conn, talk, vector=query, limit=limit, ef_search=64, min_similarity=-1.0,
                exact_max=0, matching=matching, at_most=0,
            )  # fmt: skip

    for limit in (5, 25, 40):  # short of passing units: the filtered walk; else dropped
        walked = nearest(limit, None)
        dropped = nearest(limit, Matching(failing=failing, share=0.9))
        assert [u for u, _ in dropped] == [u for u, _ in walked]
        assert not {str(u) for u, _ in dropped} & failing.text


def test_a_unit_written_after_the_failing_units_were_read_is_not_found_under_the_filter(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str, monkeypatch: Any
) -> None:
    """The failing units held are as of their refresh's snapshot; a unit that fails the filter
    and commits after it (while the query is embedded, before the walk without the filter)
    is in no list of failing units, so the retrievers may return it: the candidates' read
    checks the filter again, and the search does not return it."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.arms import exact
    from memora.retrieval.types import SearchParams

    _store_pets(inline_api, agent_id)  # 24 units, 16 by Alice or Bob: a broad filter
    monkeypatch.setattr(exact, "EXACT_SCAN_CAP", 3)  # walked, not ranked exactly
    monkeypatch.setattr(exact, "_estimate", lambda _c, _s, where: 16.0 if where.sql else 24.0)
    embedder = get_embedder(settings.embedding_model)
    retriever = Retriever(settings.model_copy(update={"filter_exact_scan_max": 2}), pool, embedder)
    query = "Which pet did Bob talk about at dinner?"
    speakers = Filters.model_validate({"speaker": ["Alice", "Bob"]})
    params = SearchParams(agent_id, query, filters=speakers, top_k=40, trace=True)
    agent_key = SearchScope.of(params).agent_key
    try:
        assert retriever.caches.failing is not None
        for _ in range(2):  # the filter's second search: read in the background
            retriever.search(params)
        deadline = time.monotonic() + 30
        while retriever.caches.failing.reads["whole"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        late: list[uuid.UUID] = []
        read = retriever.caches.failing.refreshed

        def then_written(conn: Any, scope: SearchScope) -> Failing | None:
            held = read(conn, scope)
            with pool.connection() as other:  # Chen's: fails the filter
                vector = embedder.embed([query])[0]
                late.append(store_memory(other, agent_key, vector, START, {"speaker": "Chen"},
                                         "Bob's parrot, Chen said at dinner."))  # fmt: skip
                other.commit()
            return held

        monkeypatch.setattr(retriever.caches.failing, "refreshed", then_written)
        outcome = retriever.search(params)
        assert late and retriever.caches.failing.reads["changes"] >= 1
        assert outcome.trace is not None
        walked = {r["id"] for r in outcome.trace["paths"]["semantic"]["results"]}
        assert str(late[0]) in walked  # the walk without the filter found it
        assert str(late[0]) not in {str(h.id) for h in outcome.hits}
        assert len(outcome.hits) == 16  # the filter's every unit, no other
    finally:
        retriever.close()


def test_an_entry_with_nothing_written_since_stands_as_read(
    agent_conn: Any, pool: Any, agent_id: str
) -> None:
    """A held entry is read again only when one of the agent's units was written or removed
    since (`caches.filter_holder.written_since`): otherwise it stands, the same object with the
    same horizon; a write still open stays unseen until it commits, then is read as written."""
    conn = agent_conn
    rng = np.random.default_rng(31)

    def memory(kind: str, db: Any = conn) -> uuid.UUID:
        vector = unit_vector(rng.standard_normal(DIM))
        return store_memory(db, agent_id, vector, START, {"kind": kind}, kind)

    first = [memory("talk") for _ in range(5)] + [memory("note")]
    conn.commit()
    failing = FailingUnits(1 << 20, 600.0)
    talk = _scope(agent_id, {"kind": "talk"})
    key = failing.key(talk)
    failing.load(conn, talk)
    conn.commit()
    held = failing.held(key)
    assert held is not None and held.members.text == {str(first[-1])}

    def current() -> frozenset[str] | None:
        with conn.transaction():
            return _text(failing.refreshed(conn, talk))

    assert current() == held.members.text and failing.held(key) is held  # nothing written
    with pool.connection() as other:
        late = memory("note", other)
        assert current() == held.members.text and failing.held(key) is held  # not committed
        other.commit()
    assert current() == {str(first[-1]), str(late)}
    after = failing.held(key)
    assert after is not None and after is not held and after.horizon > held.horizon
    assert current() is not None and failing.held(key) is after
    conn.execute("DELETE FROM memory_units WHERE id = %s", (first[0],))  # a removal
    conn.commit()
    current()
    removed = failing.held(key)
    assert removed is not after and removed is not None and removed.horizon > after.horizon
    assert failing.reads == {"whole": 1, "changes": 5}
