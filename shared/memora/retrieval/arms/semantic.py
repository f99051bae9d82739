"""The semantic retriever: the agent's units nearest to the query's embedding, through the
HNSW index of `memory_vectors` (migration 0012: the active embedded units' half-precision
embeddings inline, with the filter columns), or for a filter that few units pass, an exact
ranking of those units. `exact.plan_scan` chooses between the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg.rows import tuple_row

from memora.retrieval.arms.base import Arm, Search, timed
from memora.retrieval.arms.exact import (
    EXACT_SCAN_MAX,
    ExactScan,
    exact_scan,
    held_ranked,
    plan_scan,
)
from memora.retrieval.caches.passing_units import Passing
from memora.retrieval.filters import NO_FILTER, Matching, Where, broad_count, vector_scope
from memora.retrieval.types import ArmResult, SearchScope


def nearest(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    limit: int,
    ef_search: int,
    min_similarity: float,
    exact_max: int = EXACT_SCAN_MAX,
    matching: Matching | None = None,
    at_most: int | None = None,
    first: Callable[[list[tuple[UUID, float]]], None] | None = None,
    first_count: int = 0,
    known: Passing | None = None,
) -> list[tuple[UUID, float]]:
    """Nearest units by cosine similarity through the HNSW index, at least `min_similarity`.

    Iterative index scans (pgvector ≥ 0.8) keep going until `limit` rows pass the agent and
    fact-type filters, so a small agent in a large table still gets its neighbours. A filter
    that leaves few units (at most `exact_max`, by the planner's estimate through the filter's
    index statistics, then checked) is answered by an exact scan of those units instead: the
    HNSW walk would have to pass over most of the agent's units to find them. There, as in
    seed 001's filtered search, the filter is what selects: the matching units are ranked by
    similarity with no `min_similarity` floor (a canonical question such as "who am I?" is
    far from the declarative memories it asks for). A broader filter is also ranked exactly
    when that costs less than the walk (WALK_COST), with the floor, as the walk would. After
    an exact scan `matching.complete` holds every unit that passed (the graph's steps then
    check their targets against it). `at_most`: `plan_scan`'s answer, when already made.
    `known`: the filter's units held in the query service, as read in this search
    (`PassingUnits.read`), which then rank the exact scan in place of the database.
    Otherwise the HNSW walk (`_walked`).

    `first`, for a filtered walk: called with the walk's first `first_count` units (fewer if
    that is all) as soon as they are read, while the walk goes on to `limit`. Those come from
    the walk's first pass over the index, in order: its nearest, before the rounds that look
    further out for the filter's sake (what the graph starts from)."""
    if at_most is None:
        at_most = plan_scan(conn, scope, limit=limit, exact_max=exact_max, matching=matching)
    exact = _ranked_exactly(
        conn, scope, vector=vector, limit=limit, at_most=at_most, matching=matching, known=known
    )
    if exact is not None:
        if exact.count <= exact_max:
            return exact.ranked
        return [(i, sim) for i, sim in exact.ranked if sim >= min_similarity]
    rows = _walked(
        conn, scope, vector=vector, limit=limit, ef_search=ef_search,
        min_similarity=min_similarity, matching=matching, first=first, first_count=first_count,
    )  # fmt: skip
    found = [(i, float(sim)) for i, sim in rows if sim >= min_similarity]
    return sorted(found, key=lambda x: -x[1])  # relaxed order: re-sort


def _ranked_exactly(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    limit: int,
    at_most: int,
    matching: Matching | None,
    known: Passing | None,
) -> ExactScan | None:
    """The exact scan the plan chose (`at_most` units; 0: none), from the held units (`known`)
    or in PostgreSQL; None when there is none or more passed than planned. `matching` learns
    every unit that passed, and is settled: after an exact scan the walk learns nothing."""
    exact = None
    if at_most and known is not None:
        exact = held_ranked(known, vector, limit)
    elif at_most:
        exact = exact_scan(conn, scope, vector=vector, limit=limit, at_most=at_most)
    if at_most and matching is not None:
        if exact is not None:
            matching.know_all(exact.ids, exact.members)
        matching.settled.set()  # all there is to know of who passes: the walk learns nothing
    return exact


def _walked(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    limit: int,
    ef_search: int,
    min_similarity: float,
    matching: Matching | None,
    first: Callable[[list[tuple[UUID, float]]], None] | None,
    first_count: int,
) -> list[tuple[UUID, float]]:
    """The HNSW walk's rows, in relaxed order. Under a broad filter whose failing units are
    known (`matching.failing`: held in the query service) the walk is the unfiltered one, as
    many as the filter's share needs for `limit` and a quarter more, and those units are
    dropped; when more of them failed, the filtered walk follows."""
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        (str(ef_search),),
    )  # in a pipeline with the walk (one round trip fewer) it took longer: benchmarks-history.md
    failing = matching.failing if matching is not None and scope.where.sql else None
    if failing is None:
        return _walk(conn, scope, scope.where, vector, limit, min_similarity, first, first_count)
    # a broad filter whose failing units are held: walked without it, those dropped
    share = matching.share if matching is not None else None
    walked = broad_count(limit, share or 0.0, len(failing))
    rows = _walk(conn, scope, NO_FILTER, vector, walked, min_similarity)
    passed = failing.outside(rows)
    if len(passed) >= limit or len(rows) < walked:
        return passed[:limit]
    # more of the nearest failed than the share expected: walked with the filter
    return _walk(conn, scope, scope.where, vector, limit, min_similarity)


def _walk(
    conn: Connection[Any],
    scope: SearchScope,
    where: Where,
    vector: np.ndarray,
    limit: int,
    min_similarity: float,
    first: Callable[[list[tuple[UUID, float]]], None] | None = None,
    first_count: int = 0,
) -> list[tuple[UUID, float]]:
    """The HNSW walk: the `limit` units nearest to `vector` that pass `where`, (id, sim)."""
    sql = f"""
        SELECT m.unit_id AS id, 1 - (m.embedding <=> %(v)s::halfvec) AS sim FROM memory_vectors m
        WHERE {vector_scope("m")} {where.sql}
        ORDER BY m.embedding <=> %(v)s::halfvec LIMIT %(limit)s
        """
    params = {"v": vector, "limit": limit, **scope.params, **where.params}
    # (id, sim) tuples: no dict a row. Planned for its agent every time, never prepared: in a
    # table of many agents the generic plan suits the many small ones (their rows by the
    # agent's index, then sorted), and a large agent's search then sorted all its units
    # instead of walking the index (bench/many_agents.py: 111 ms against 3.6 at 100k).
    if first is None or not where.sql:
        cursor = conn.cursor(row_factory=tuple_row)
        rows: list[tuple[UUID, float]] = cursor.execute(sql, params, prepare=False).fetchall()
        return rows
    # a cursor: the server stops after the first rows and sends them (a plain query's rows
    # would wait in its output buffer until the end)
    with conn.cursor(name="semantic_walk", row_factory=tuple_row) as walk:
        walk.execute(sql, params)
        rows = walk.fetchmany(first_count)
        first([(i, float(sim)) for i, sim in rows if sim >= min_similarity])
        rows += walk.fetchall()
    return rows


class SemanticArm(Arm):
    """The semantic retriever. Started with the search, it takes a connection and plans a
    filtered scan (`exact.plan_scan`) while the query is embedded; its time in the trace counts
    from the embedding. Its nearest units are the graph's entry points (`Search.entry_points`).

    An HNSW walk under a filter that most units fail goes on well past its first hits to find
    enough that pass; the graph then starts from those first hits (the walk's nearest) while
    the walk goes on. `matching` learns who passes the filter; its `settled` is set once the
    exact scan is done (every unit that passes known), else as soon as the plan says there is
    none. A filter whose units are held here has them brought up to date while the query is
    embedded, so who passes is known before the embedding is (the entity retriever, waiting for
    it, then starts with the embedding, as it does unfiltered)."""

    name = "semantic"

    def retrieve(self, search: Search) -> ArmResult:
        scope, matching = search.scope, search.matching
        try:
            with self.pool.tenant_connection(scope.tenant_id) as conn:
                at_most, known = self._plan(conn, search)
                narrow_walk = bool(scope.where.sql) and not at_most and not matching.broad
                vector = search.query_vector()
                s = self.settings
                found = timed(
                    self.name,
                    lambda: nearest(
                        conn, scope, vector=vector, limit=search.per_arm,
                        ef_search=min(1000, max(64, 2 * search.per_arm, search.budget)),
                        min_similarity=s.semantic_min_similarity,
                        exact_max=s.filter_exact_scan_max, matching=matching, at_most=at_most,
                        first=_entry_points(search) if narrow_walk else None,
                        first_count=s.graph_entry_points, known=known,
                    ),
                )  # fmt: skip
                matching.settled.set()  # before the commit: those waiting need not wait for it
                if not search.entry_points.done():
                    search.entry_points.set_result(found.ranked)
            return found
        finally:  # also when the above failed: the retrievers waiting on them go on
            matching.planned.set()
            matching.settled.set()
            if not search.entry_points.done():
                search.entry_points.set_exception(RuntimeError("the semantic retriever failed"))

    def _plan(self, conn: Connection[Any], search: Search) -> tuple[int, Passing | None]:
        """How many units the scan may rank exactly (0: walk), and the filter's units when held
        here, brought up to date (a filter searched before is ranked from them)."""
        scope, matching, caches = search.scope, search.matching, self.context.caches
        passing = caches.passing
        recurs = bool(scope.where.sql) and passing is not None and passing.recurs(scope)
        held = passing if recurs else None
        at_most = plan_scan(
            conn, scope, limit=search.per_arm, exact_max=self.settings.filter_exact_scan_max,
            matching=matching, passing=held, failing=caches.failing, units=search.documents,
        )  # fmt: skip
        if matching.broad:
            self._learn_failing(conn, scope, matching)
        matching.planned.set()
        if not at_most:
            matching.settled.set()  # a walk: who passes is not learned
        known = None
        if at_most and held is not None:
            known = held.read(conn, scope, at_most)
            if known is not None:
                matching.know_all(known.text, known.members)
            else:
                at_most = 0  # more pass than may be ranked exactly: walked
            matching.settled.set()
        return at_most, known

    def _learn_failing(self, conn: Connection[Any], scope: SearchScope, matching: Matching) -> None:
        """Under a broad filter, the units that fail it (`matching.failing`) when held here,
        brought up to date in `conn`; else, from the filter's second search, read in the
        background for the next searches (`caches.failing_units`)."""
        failing = self.context.caches.failing
        if failing is None:
            return
        held = failing.refreshed(conn, scope)
        if held is not None:
            matching.failing, matching.failing_since = held.members, held.horizon
        elif failing.wanted(scope):
            self.context.caches.read_later(failing, scope)


def _entry_points(search: Search) -> Callable[[list[tuple[UUID, float]]], None]:
    """A filtered walk's first hits, handed to the graph while the walk goes on."""

    def hand_over(first: list[tuple[UUID, float]]) -> None:
        if not search.entry_points.done():
            search.entry_points.set_result(first)

    return hand_over
