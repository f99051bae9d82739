"""The semantic retriever: the agent's units nearest to the query's embedding, through the
HNSW index of `memory_vectors` (migration 0012: the active embedded units' half-precision
embeddings inline, with the filter columns), or for a filter that few units pass, an exact
ranking of those units. `plan_scan` chooses between the two from the planner's estimates and
the agent's own count; the temporal retriever's seeds (`arms`) are chosen the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg.rows import tuple_row

from memora.basics.models import FACT_TYPES
from memora.retrieval.failing import FailingUnits
from memora.retrieval.filters import NO_FILTER, Matching, Where, broad_count, vector_scope
from memora.retrieval.passing import Passing, PassingUnits
from memora.retrieval.types import SearchScope
from memora.store import terms as term_counts

# Filtered searches over at most this many units scan them exactly (see `nearest`;
# MEMORA_FILTER_EXACT_SCAN_MAX; 0: never).
EXACT_SCAN_MAX = 2000
# Broader filters are ranked exactly too while that is the cheaper way: an HNSW walk passes
# over about limit · agent / n units to find `limit` of the n that match, each costing
# about WALK_COST units of an exact scan, so the scan wins while n² ≤ WALK_COST · limit ·
# agent; never above EXACT_SCAN_CAP units. Measured at 100k memories (limit 50) on
# memory_vectors: an exact scan costs ~2 µs a unit (4,431 scattered units in 9 ms, 10,000 in
# 17 ms); the walk ~9 µs a unit passed over when filter and question agree (5 % filter:
# 8.5 ms), five times that when they pull apart (`speaker: Alice` for a question about Bob:
# 43 ms), and after a walk the graph's steps check each link target in their links' query
# (~1,300 primary-key probes a search, ~3 ms), where an exact scan hands them every matching
# unit; 12 puts the break-even at ~7,700 units at 100k (10,000 units: exact 17.5 ms, walk
# 9 ms and checks 3 ms). Migration
# 0012 keeps 1,000 statistics samples of memory_vectors.metadata, so the planner's count of
# a 5 % filter is off by ~15 % (with the default 100, by up to 2×: 3,029–9,085 for 4,431).
# Where the query service holds the filter's units (`memora.retrieval.passing`), ranking them
# costs ~0.1 µs a unit once read, besides ~1.5 ms to read what changed (a whole read, on the
# second search of a filter, ~13 µs a unit): up to EXACT_SCAN_CAP units they are ranked
# exactly.
WALK_COST = 12
EXACT_SCAN_CAP = 20_000


def plan_scan(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    limit: int,
    exact_max: int = EXACT_SCAN_MAX,
    matching: Matching | None = None,
    passing: PassingUnits | None = None,
    failing: FailingUnits | None = None,
    units: int | None = None,
) -> int:
    """How many units `nearest` may rank exactly for the scope's filter (0: walk the HNSW
    index), from the planner's estimates, no rows read: it needs no query vector, so the
    retriever runs it while the query is being embedded. Sets `matching.share`. `passing`:
    the query service ranks the filter's units itself (`held_scan`), so ranking them exactly
    costs less than the walk up to EXACT_SCAN_CAP units, and where it holds them already,
    their count as last read stands for the estimate; so does the agent's count less that of
    the units failing a broad filter, where `failing` holds those. `units`: the agent's
    searchable units as counted lately (`KeywordIndex.documents`), else counted here."""
    if not scope.where.sql or exact_max <= 0:
        return 0
    if units is None:
        units = term_counts.frequencies(conn, scope.agent_key, ())[term_counts.DOCUMENTS]
    at_most, share = _exact_scan_bound(conn, scope, limit, exact_max, units, passing, failing)
    if matching is not None:
        matching.share = share
    return at_most


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

    Under a broad filter whose failing units are known (`matching.failing`: held in the
    query service) the walk is the unfiltered one, as many as the filter's share needs for
    `limit` and a quarter more, and those units are dropped; when more of them failed, the
    filtered walk follows.

    `first`, for a filtered walk: called with the walk's first `first_count` units (fewer if
    that is all) as soon as they are read, while the walk goes on to `limit`. Those come from
    the walk's first pass over the index, in order: its nearest, before the rounds that look
    further out for the filter's sake (what the graph starts from)."""
    if at_most is None:
        at_most = plan_scan(conn, scope, limit=limit, exact_max=exact_max, matching=matching)
    exact = None
    if at_most and known is not None:
        exact = _held_ranked(known, vector, limit)
    elif at_most:
        exact = exact_scan(conn, scope, vector=vector, limit=limit, at_most=at_most)
    if at_most and matching is not None:
        if exact is not None:
            matching.know_all(exact.ids, exact.members)
        matching.settled.set()  # all there is to know of who passes: the walk learns nothing
    if exact is not None:
        if exact.count <= exact_max:
            return exact.ranked
        return [(i, sim) for i, sim in exact.ranked if sim >= min_similarity]
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        (str(ef_search),),
    )  # sent in a pipeline with the walk (one round trip fewer) it took longer: benchmarks.md
    failing = matching.failing if matching is not None and scope.where.sql else None
    if failing is None:
        rows = _walk(conn, scope, scope.where, vector, limit, min_similarity, first, first_count)
    else:  # a broad filter whose failing units are held: walked without it, those dropped
        share = matching.share if matching is not None else None
        walked = broad_count(limit, share or 0.0, len(failing))
        rows = _walk(conn, scope, NO_FILTER, vector, walked, min_similarity)
        passed = failing.outside(rows)
        if len(passed) >= limit or len(rows) < walked:
            rows = passed[:limit]
        else:  # more of the nearest failed than the share expected: walked with the filter
            rows = _walk(conn, scope, scope.where, vector, limit, min_similarity)
    found = [(i, float(sim)) for i, sim in rows if sim >= min_similarity]
    return sorted(found, key=lambda x: -x[1])  # relaxed order: re-sort


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
    # (id, sim) tuples: no dict a row
    if first is None or not where.sql:
        cursor = conn.cursor(row_factory=tuple_row)
        rows: list[tuple[UUID, float]] = cursor.execute(
            sql, params, prepare=where.prepare
        ).fetchall()
        return rows
    # a cursor: the server stops after the first rows and sends them (a plain query's rows
    # would wait in its output buffer until the end)
    with conn.cursor(name="semantic_walk", row_factory=tuple_row) as walk:
        walk.execute(sql, params)
        rows = walk.fetchmany(first_count)
        first([(i, float(sim)) for i, sim in rows if sim >= min_similarity])
        rows += walk.fetchall()
    return rows


def _exact_scan_bound(
    conn: Connection[Any],
    scope: SearchScope,
    limit: int,
    exact_max: int,
    units: int,
    passing: PassingUnits | None,
    failing: FailingUnits | None = None,
) -> tuple[int, float | None]:
    """How many units an exact scan may read for the scope's filter (0: walk HNSW instead),
    and the share of the agent's units expected to pass (None when not estimated: at most
    `exact_max` pass). The agent's own count (the write path's, one index entry or a few)
    bounds both estimates: for an agent the statistics do not single out, the planner
    guesses a table-wide average, so in a table of many agents a new agent's narrow filter
    could be taken for a broad one and walked, with the similarity floor, when its few
    units should simply be ranked."""
    if units <= exact_max:
        return exact_max, None
    held = passing.count(scope) if passing is not None else None
    if held is not None:  # as last read (at most EXACT_SCAN_CAP): no estimate needed
        return (exact_max, None) if held <= exact_max else (EXACT_SCAN_CAP, min(held / units, 1))
    every_type = set(scope.fact_types) >= set(FACT_TYPES)  # as `units` and `failing` count
    fails = failing.count(scope) if failing is not None and every_type else None
    agent: float = units
    if fails is not None:  # a broad filter: all but these pass
        matching: float = max(units - fails, 0)
    else:
        matching = min(_estimate(conn, scope, scope.where), units)
    if matching <= exact_max:
        return exact_max, None
    if fails is None:
        agent = min(_estimate(conn, scope, NO_FILTER), units)
    share = min(matching / agent, 1.0) if agent else 1.0
    cheaper = passing is not None or matching**2 <= WALK_COST * limit * agent
    if matching <= EXACT_SCAN_CAP and cheaper:
        return EXACT_SCAN_CAP, share
    return 0, share


def _estimate(conn: Connection[Any], scope: SearchScope, where: Where) -> float:
    """How many of the agent's searchable units the planner expects to pass `where`: its
    statistics of the metadata column (containment is checked against the histogram's
    sample of documents) or of the turn index, no rows read. Under row-level security the
    estimate also counts the tenant condition, so with many tenants it runs low; `exact_scan`
    checks the true count."""
    row = conn.execute(
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM memory_vectors m "
        f"WHERE {vector_scope('m')} {where.sql}",
        {**scope.params, **where.params},
        prepare=False,
    ).fetchone()
    plan = row["QUERY PLAN"] if row else None
    return float(plan[0]["Plan"]["Plan Rows"]) if plan else math.inf


@dataclass(frozen=True)
class ExactScan:
    """An exact scan's answer. `ids`: every unit that passed, as one comma-separated text, the
    form that costs least both ways (5,000 ids: ~1 ms to read as one text, twice that as rows;
    sent back as one text ~3 ms, as a list of strings ~12 ms of psycopg's dumping)."""

    ranked: list[tuple[UUID, float]]
    count: int
    ids: str
    members: frozenset[str] | None = None  # the ids as a set, when already made


def exact_scan(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    limit: int,
    at_most: int,
    ids: bool = True,
) -> ExactScan | None:
    """The `limit` units passing the scope's filter most similar to `vector`, how many
    passed and (`ids`) their ids, or None when more than `at_most` pass (the estimate was
    low): then at most `at_most` + 1 rows were read."""
    where = scope.where
    passed = "(SELECT string_agg(unit_id::text, ',') FROM matching)" if ids else "NULL"
    row = conn.execute(
        f"""
        WITH matching AS MATERIALIZED (
            SELECT m.unit_id, m.embedding <=> %(v)s::halfvec AS distance
            FROM memory_vectors m WHERE {vector_scope("m")} {where.sql} LIMIT %(cap)s
        )
        SELECT (SELECT count(*) FROM matching) AS n, {passed} AS passed,
               array_agg(unit_id ORDER BY distance, unit_id) AS best,
               array_agg(1 - distance ORDER BY distance, unit_id) AS similarity
        FROM (SELECT unit_id, distance FROM matching ORDER BY distance, unit_id
              LIMIT %(limit)s) AS best  -- one sort of all that passed
        """,
        {"v": vector, "cap": at_most + 1, "limit": limit, **scope.params, **where.params},
        prepare=where.prepare,
    ).fetchone()
    if not row or row["n"] > at_most:
        return None
    best = zip(row["best"] or [], map(float, row["similarity"] or []), strict=True)
    return ExactScan(list(best), int(row["n"]), row["passed"] or "")


def held_scan(
    passing: PassingUnits,
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    limit: int,
    at_most: int,
) -> ExactScan | None:
    """`exact_scan`'s answer from the units held in the query service for the scope's filter
    (`memora.retrieval.passing`: brought up to date in `conn`'s snapshot first)."""
    held = passing.read(conn, scope, at_most)
    return None if held is None else _held_ranked(held, vector, limit)


def _held_ranked(held: Passing, vector: np.ndarray, limit: int) -> ExactScan:
    return ExactScan(held.nearest(vector, limit), held.count, held.text, held.members)
