"""Metadata filters inside every retriever, on real PostgreSQL: each path's own results (not
only the final top k) hold only matching units; tags, ranges and time; bad filters are 422."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings

pytestmark = pytest.mark.integration

ITEMS = [
    {"content": "Alice adopted a grey cat named Pixel.", "event_date": "2024-03-01",
     "metadata": {"scene": "s1", "turn": 1, "speaker": "Alice", "tags": ["pets", "home"]}},
    {"content": "Alice said the cat Pixel sleeps on her laptop.", "event_date": "2024-03-02",
     "metadata": {"scene": "s1", "turn": 2, "speaker": "Alice", "tags": ["pets"]}},
    {"content": "Bob said his cat Pixel knocked over a plant.", "event_date": "2024-04-01",
     "metadata": {"scene": "s2", "turn": 5, "speaker": "Bob", "tags": ["pets", "plants"]}},
    {"content": "Bob repaired the kitchen sink with Alice.", "event_date": "2024-04-02",
     "metadata": {"scene": "s2", "turn": 6, "speaker": "Bob", "tags": ["home"]}},
]  # fmt: skip


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


@pytest.fixture()
def stored(inline_api: Any, agent_id: str) -> dict[str, dict[str, Any]]:
    body = {"agent_id": agent_id, "document_id": "scenes", "items": ITEMS}
    response = inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    op = inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed", op
    return {}


def _search(api: TestClient, agent_id: str, query: str, filters: Any) -> dict[str, Any]:
    body = {"agent_id": agent_id, "query": query, "filters": filters, "trace": True, "top_k": 10}
    response = api.post("/api/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _every_path_only(result: dict[str, Any], allowed: set[str]) -> None:
    for name, path in result["trace"]["paths"].items():
        ids = {r["id"] for r in path["results"]}
        assert ids <= allowed, (name, path)


def _ids_where(api: TestClient, agent_id: str, predicate: Any) -> set[str]:
    everything = _search(api, agent_id, "Pixel cat Alice Bob sink plant laptop", None)
    return {r["id"] for r in everything["results"] if predicate(r["metadata"])}


def test_equality_applies_inside_every_path(
    stored: Any, query_api: TestClient, agent_id: str
) -> None:
    bob = _ids_where(query_api, agent_id, lambda m: m.get("speaker") == "Bob")
    assert len(bob) == 2
    result = _search(
        query_api, agent_id, "What did they say about the cat Pixel?", {"speaker": "Bob"}
    )
    assert {r["metadata"]["speaker"] for r in result["results"]} == {"Bob"}
    _every_path_only(result, bob)
    assert result["trace"]["paths"]["keyword"]["count"] >= 1
    # "Pixel" is named: the entity retriever compares its mentions among the units that pass
    # (the semantic retriever's exact scan knows them all)
    assert result["trace"]["paths"]["entity"]["count"] >= 1
    assert result["trace"]["filters"] == {"speaker": "Bob"}


def test_ranges_lists_tags_and_time(stored: Any, query_api: TestClient, agent_id: str) -> None:
    q = "Pixel the cat"
    turns = _search(query_api, agent_id, q, {"turn": {"gte": 2, "lte": 5}})
    assert sorted(r["metadata"]["turn"] for r in turns["results"]) == [2, 5]
    one_of = _search(query_api, agent_id, q, {"scene": ["s1"], "speaker": ["Alice", "Bob"]})
    assert {r["metadata"]["scene"] for r in one_of["results"]} == {"s1"}
    any_tag = _search(query_api, agent_id, q, {"tags": {"any": ["plants", "home"]}})
    assert {r["metadata"]["turn"] for r in any_tag["results"]} == {1, 5, 6}
    all_tags = _search(query_api, agent_id, q, {"tags": {"all": ["pets", "home"]}})
    assert [r["metadata"]["turn"] for r in all_tags["results"]] == [1]
    april = _search(
        query_api,
        agent_id,
        q,
        {"time": {"start": "2024-04-01T00:00:00Z", "end": "2024-05-01T00:00:00Z"}},
    )
    assert {r["metadata"]["turn"] for r in april["results"]} == {5, 6}
    nothing = _search(query_api, agent_id, q, {"speaker": "Carol"})
    assert nothing["results"] == []


def test_temporal_path_is_filtered(stored: Any, query_api: TestClient, agent_id: str) -> None:
    result = _search(
        query_api, agent_id, "What happened with the cat in April 2024?", {"speaker": "Alice"}
    )
    temporal = result["trace"]["paths"]["temporal"]
    assert temporal["ran"]
    alice = _ids_where(query_api, agent_id, lambda m: m.get("speaker") == "Alice")
    _every_path_only(result, alice)


@pytest.mark.parametrize(
    "filters", [{"turn": {"between": 3}}, {"bad key": 1}, {"tags": ["x"]}, "speaker=Bob"]
)
def test_bad_filters_are_422(query_api: TestClient, agent_id: str, filters: Any) -> None:
    response = query_api.post(
        "/api/search", json={"agent_id": agent_id, "query": "cat", "filters": filters}
    )
    assert response.status_code == 422, response.text


def _store_pets(inline_api: Any, agent_id: str) -> None:
    """24 dinner memories: 3 speakers × 8 pets, in 3 scenes, turns 0–23."""
    pets = ["cat", "dog", "parrot", "hamster", "goldfish", "rabbit", "turtle", "pony"]
    items = [
        {"content": f"{who} talked about the {pet} at dinner on day {i}.",
         "metadata": {"scene": f"s{i % 3}", "turn": i, "speaker": who}}
        for i, (who, pet) in enumerate((w, p) for w in ("Alice", "Bob", "Chen") for p in pets)
    ]  # fmt: skip
    response = inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": items})
    assert response.status_code == 200, response.text


def test_exact_scan_and_hnsw_walk_rank_a_filter_alike(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str
) -> None:
    """The semantic retriever's two ways to a filtered list, forced through `exact_max`
    (MEMORA_FILTER_EXACT_SCAN_MAX): an exact scan of the matching units and the HNSW walk
    with the filter in its scan give the same ranking above the similarity floor; an exact
    scan that finds more units than it may rank gives way (None) after reading at most
    `at_most` + 1 of them."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval.arms import exact, semantic
    from memora.retrieval.filters import Filters, Matching, compile_filters
    from memora.retrieval.types import SearchScope

    _store_pets(inline_api, agent_id)
    vector = get_embedder(settings.embedding_model).embed(["Which pet did they discuss?"])[0]
    types = ["world", "agent", "opinion"]
    for filters in ({"scene": "s1"}, {"turn": {"gte": 4, "lt": 20}}, {"speaker": ["Bob"]}):
        where = compile_filters(Filters.model_validate(filters), "m")
        scope = SearchScope("default", agent_id, tuple(types), where)
        near = {"vector": vector, "limit": 5, "ef_search": 64, "min_similarity": 0.3}
        with pool.tenant_connection("default") as conn:
            walk = semantic.nearest(conn, scope, **near, exact_max=0)
            matching = Matching()
            ranked = semantic.nearest(conn, scope, **near, exact_max=10_000, matching=matching)
            capped = exact.exact_scan(conn, scope, vector=vector, limit=5, at_most=3)
            passing = {
                str(r["id"])
                for r in conn.execute(
                    f"SELECT m.id FROM memory_units m WHERE m.agent_id = %(agent)s "
                    f"AND m.fact_type = ANY(%(types)s) {where.sql}",
                    {"agent": agent_id, "types": types, **where.params},
                )
            }
        assert walk, filters
        assert [i for i, _ in walk] == [i for i, s in ranked if s >= 0.3][: len(walk)], filters
        assert capped is None
        # the exact scan saw every unit that passes: the graph's steps check against them
        assert matching.complete == passing and len(passing) > 5, filters


def test_the_walks_settings_hold_for_its_transaction_only(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str
) -> None:
    """The walk's HNSW settings are its transaction's, not the session's: a pooled connection
    lent next (the pool keeps sessions between lendings) walks with the defaults."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval.arms import semantic
    from memora.retrieval.types import SearchScope

    _store_pets(inline_api, agent_id)
    vector = get_embedder(settings.embedding_model).embed(["Which pet did they discuss?"])[0]
    scope = SearchScope("default", agent_id, ("world", "agent", "opinion"))
    with pool.tenant_connection("default") as conn:
        found = semantic.nearest(
            conn, scope, vector=vector, limit=50, ef_search=321, min_similarity=0.0
        )
        held = conn.execute(
            "SELECT current_setting('hnsw.ef_search') AS ef,"
            " current_setting('hnsw.iterative_scan') AS scan"
        ).fetchone()
    with pool.tenant_connection("default") as conn:
        after = conn.execute("SELECT current_setting('hnsw.ef_search', true) AS ef").fetchone()
    assert len(found) == 24  # every unit of the agent, past the default ef_search's reach
    assert held == {"ef": "321", "scan": "relaxed_order"}
    assert after is not None and after["ef"] != "321"


def test_the_agents_own_count_bounds_the_planners_guess(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str, monkeypatch: Any
) -> None:
    """For an agent its statistics do not single out, the planner guesses a table-wide
    average: in a table of many agents, far more units than a new agent has. The agent's own
    count bounds that guess, so a narrow filter on a small agent is still ranked exactly, with
    no similarity floor; past `exact_max` the estimates decide, as before."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval.arms import exact, semantic
    from memora.retrieval.filters import Filters, Matching, compile_filters
    from memora.retrieval.types import SearchScope

    _store_pets(inline_api, agent_id)
    monkeypatch.setattr(exact, "_estimate", lambda *_: 1_000_000.0)  # the planner's guess
    vector = get_embedder(settings.embedding_model).embed(["Who am I?"])[0]
    where = compile_filters(Filters.model_validate({"speaker": ["Bob"]}), "m")
    scope = SearchScope("default", agent_id, ("world", "agent", "opinion"), where)
    with pool.tenant_connection("default") as conn:
        matching = Matching()
        assert exact.plan_scan(conn, scope, limit=5, matching=matching) > 0
        assert matching.share is None  # not estimated: the agent alone is under exact_max
        ranked = semantic.nearest(
            conn, scope, vector=vector, limit=50, ef_search=64, min_similarity=0.99
        )
        wide = Matching()  # past exact_max the estimates decide, each at most the agent's 24
        exact.plan_scan(conn, scope, limit=5, exact_max=3, matching=wide)
        assert wide.share == 1.0
        bob = conn.execute(
            f"SELECT m.id FROM memory_units m WHERE m.agent_id = %(agent)s {where.sql}",
            {"agent": agent_id, **where.params},
        ).fetchall()
    assert {i for i, _ in ranked} == {r["id"] for r in bob} and len(bob) == 8


def test_a_narrow_walk_starts_the_graph_from_its_first_hits(
    settings: Settings, pool: Any, inline_api: Any, agent_id: str, monkeypatch: Any
) -> None:
    """Under a filter that most units fail, the HNSW walk hands its first hits to the graph,
    which runs on its own connection while the walk goes on (`first`): the walk's list is the
    same, the first hits are its nearest, and where the walk's first pass over the index
    covers them (as here), the graph is the one that would have followed the walk."""
    from memora.basics.models import utcnow
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.arms import Search, semantic
    from memora.retrieval.filters import Filters, compile_filters
    from memora.retrieval.types import SearchParams, SearchScope

    _store_pets(inline_api, agent_id)
    embedder = get_embedder(settings.embedding_model)
    vector = embedder.embed(["Which pet did Bob talk about?"])[0]
    types = ["world", "agent", "opinion"]
    bob = Filters.model_validate({"speaker": "Bob"})
    where = compile_filters(bob, "m")
    scope = SearchScope("default", agent_id, tuple(types), where)
    near = {"vector": vector, "limit": 6, "ef_search": 64, "min_similarity": 0.0, "exact_max": 0}
    handed: list[list[Any]] = []
    with pool.tenant_connection("default") as conn:
        plain = semantic.nearest(conn, scope, **near)
        early = semantic.nearest(conn, scope, **near, first=handed.append, first_count=3)
    assert early == plain and len(plain) == 6
    assert handed == [plain[:3]]

    retriever = Retriever(settings.model_copy(update={"filter_exact_scan_max": 0}), pool, embedder)
    handed_over: list[Any] = []
    hand_over = semantic._entry_points
    monkeypatch.setattr(
        semantic,
        "_entry_points",
        lambda search: lambda first: handed_over.append(first) or hand_over(search)(first),
    )
    params = SearchParams(agent_id, "Which pet did Bob talk about?", filters=bob, trace=True)
    try:
        outcome = retriever.search(params)
        assert outcome.trace is not None
        paths = outcome.trace["paths"]
        assert len(handed_over) == 1  # the graph started during the walk
        graph = [(r["id"], r["score"]) for r in paths["graph"]["results"]]
        nearest = [(UUID(r["id"]), r["score"]) for r in paths["semantic"]["results"]]
        again = Search(params, SearchScope.of(params), utcnow(), per_arm=50, budget=100)
        again.entry_points.set_result(nearest)
        after = next(a for a in retriever.arms if a.name == "graph").retrieve(again)
    finally:
        retriever.close()
    with pool.tenant_connection("default") as conn:
        rows = conn.execute(
            "SELECT id::text FROM memory_units WHERE agent_id = %s AND metadata @> %s::jsonb",
            (agent_id, '{"speaker": "Bob"}'),
        ).fetchall()
    bobs = {r["id"] for r in rows}
    assert graph and {i for i, _ in graph} <= bobs
    assert graph == [(str(i), pytest.approx(a, abs=1e-6)) for i, a in after.ranked]


def test_temporal_seeds_ranked_exactly_equal_the_walk(
    stored: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    """The temporal retriever ranks a range's units exactly when it holds few (migration
    0013's indexes give the count): the same seeds, in the same order, as the HNSW walk."""
    from datetime import UTC, datetime

    from memora.nlp.temporal import QueryTimeRange
    from memora.retrieval.arms import temporal
    from memora.retrieval.filters import NO_FILTER, Filters, compile_filters
    from memora.retrieval.types import SearchScope

    vector = query_api.app.state.embedder.embed(["Pixel the cat"])[0]
    types = ["world", "agent", "opinion"]
    march = QueryTimeRange(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 4, 1, tzinfo=UTC), "")
    alice = compile_filters(Filters.model_validate({"speaker": "Alice"}), "m")
    seeds = {"vector": vector, "time_range": march, "limit": 5, "seed_similarity": 0.0}
    with pool.tenant_connection("default") as conn:
        for where in (NO_FILTER, alice):
            scope = SearchScope("default", agent_id, tuple(types), where)
            walk = temporal._temporal_seeds(conn, scope, **seeds, exact_max=0)
            exact = temporal._temporal_seeds(conn, scope, **seeds, exact_max=2000)
            assert exact == walk and walk, where
            assert all(march.start <= at < march.end for _, at in exact)
        assert len(exact) == 2  # Alice's two, in March; Bob's are in April


def test_filtered_graph_steps_keep_links_to_passing_units(
    stored: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    """A filtered graph step keeps only links to units that pass: checked in the links'
    query, or, after an exact scan, against the complete set of units that pass, with no
    check in the database."""
    from memora.retrieval.arms import graph
    from memora.retrieval.filters import Filters, Matching, compile_filters

    everything = _search(query_api, agent_id, "Pixel cat Alice Bob sink plant laptop", None)
    ids = [r["id"] for r in everything["results"]]
    bob = {r["id"] for r in everything["results"] if r["metadata"].get("speaker") == "Bob"}
    where = compile_filters(Filters.model_validate({"speaker": "Bob"}), "m")
    matching = Matching()
    with pool.tenant_connection("default") as conn:
        unfiltered = graph.neighbours(conn, ids, fanout=20)
        filtered = graph.neighbours(conn, ids, fanout=20, where=where, matching=matching)
    targets = {t for edges in unfiltered.values() for t, _, _ in edges}
    assert len(targets) >= 2 and bob & targets and targets - bob
    assert {t for edges in filtered.values() for t, _, _ in edges} == targets & bob
    for source, edges in filtered.items():  # each source's strongest passing links, in order
        assert edges == [e for e in unfiltered[source] if e[0] in bob][: len(edges)]

    one = next(iter(bob & targets))
    known = Matching(complete=frozenset({one}))
    with pool.tenant_connection("default") as conn:
        # a filter no unit passes: had the database been asked, nothing would come back
        nothing = compile_filters(Filters.model_validate({"speaker": "nobody"}), "m")
        only = graph.neighbours(conn, ids, fanout=20, where=nothing, matching=known)
    assert {t for edges in only.values() for t, _, _ in edges} == {one}
    assert known.known == {}


def test_a_broad_filter_checks_units_as_they_come_up(
    stored: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    """The graph's walk for a broad filter (each unit checked when it comes up for
    exploration, `admit`) explores what the walk with every link target checked explores."""
    from memora.retrieval.activation import SpreadSettings, spread_activation
    from memora.retrieval.arms import graph
    from memora.retrieval.filters import Filters, Matching, compile_filters

    everything = _search(query_api, agent_id, "Pixel cat Alice Bob sink plant laptop", None)
    entry = {everything["results"][0]["id"]: 1.0}
    where = compile_filters(Filters.model_validate({"tags": {"any": ["pets", "home"]}}), "m")
    lazy_known = Matching()
    offered: set[str] = set()  # every target of the links the eager walk reads

    def eager_step(ids: list[str]) -> dict[str, list[Any]]:
        read = graph.links(conn, ids, limit=graph.FILTERED_SCAN * 2)
        offered.update(t for edges in read.values() for t, _, _ in edges)
        return graph.neighbours(conn, ids, fanout=2, where=where)

    with pool.tenant_connection("default") as conn:
        eager = spread_activation(entry, eager_step, 10, SpreadSettings())
        lazy = spread_activation(
            entry,
            lambda ids: graph.links(conn, ids, limit=graph.FILTERED_SCAN * 2),
            10,
            SpreadSettings(),
            admit=lambda ids: graph.passing(conn, ids, where=where, known=lazy_known.known),
            fanout=2,
        )
    assert len(eager) >= 2
    assert dict(lazy) == pytest.approx(dict(eager))
    assert lazy_known.known and set(lazy_known.known) < offered  # only what came up


def test_memora_number_reads_json_numbers_without_errors(pool: Any) -> None:
    """The range filters' leakproof function (migration 0011): a float8 for a JSON number,
    ±infinity or 0 beyond float8's range (never an error, which would leak), NULL otherwise."""
    doc = '{"a": 3, "b": -2.5, "big": -1e400, "tiny": 1e-400, "s": "3", "t": true, "n": null}'
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT k, memora_number(%s::jsonb, k) AS v FROM unnest(%s::text[]) AS k",
            (doc, ["a", "b", "big", "tiny", "s", "t", "n", "missing"]),
        ).fetchall()
    assert {r["k"]: r["v"] for r in rows} == {
        "a": 3.0, "b": -2.5, "big": float("-inf"), "tiny": 0.0,
        "s": None, "t": None, "n": None, "missing": None,
    }  # fmt: skip


def test_a_recurring_filter_is_answered_from_the_units_held_in_the_query_service(
    query_api: TestClient, inline_api: Any, agent_id: str
) -> None:
    """A filter's first search ranks it in PostgreSQL; from its second the query service
    holds its units (caches.passing_units) and answers the same, also after a new memory
    that passes it was written, which the next search reads as what changed."""
    import re

    _store_pets(inline_api, agent_id)
    body = {"agent_id": agent_id, "query": "Which pets came up at dinner?", "top_k": 8,
            "filters": {"speaker": "Bob"}, "trace": True}  # fmt: skip
    held = query_api.app.state.retriever.caches.passing  # type: ignore[attr-defined]
    before = dict(held.reads)

    def semantic() -> list[str]:
        response = query_api.post("/api/search", json=body)
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["trace"]["paths"]["semantic"]["results"]]

    first = semantic()
    assert len(first) == 8 and held.reads == before  # the database's exact scan
    assert semantic() == first  # read whole and held
    item = {"content": "Bob talked about the ferret at dinner on day 30.",
            "metadata": {"scene": "s0", "turn": 30, "speaker": "Bob"}}  # fmt: skip
    response = inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": [item]})
    assert response.status_code == 200, response.text
    third = semantic()
    assert len(third) == 9 and set(first) < set(third)
    assert held.reads == {"whole": before["whole"] + 1, "changes": before["changes"] + 1}
    scrape = query_api.get("/metrics").text
    assert re.search(r'memora_filter_cache_reads_total\{read="changes"\} [1-9]', scrape)
    # what the caches hold, at scrape time: the filter's entry and its bytes
    entries, size = held.footprint()
    assert entries >= 1 and size > 0
    assert re.search(r'memora_read_cache_entries\{cache="passing"\} [1-9]', scrape)
    assert re.search(r'memora_read_cache_bytes\{cache="passing"\} [1-9]', scrape)
    assert 'memora_read_cache_bytes{cache="mentions"}' in scrape
