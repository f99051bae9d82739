"""Exact ranking of the units a filter passes, and the plan that chooses it over the HNSW walk:
`plan_scan` decides from the planner's estimates and the agent's own count, `exact_scan` ranks
in PostgreSQL, `held_scan` from the units the query service holds. The semantic retriever and
the temporal retriever's seeds choose the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.models import FACT_TYPES
from memora.retrieval.caches.failing_units import FailingUnits
from memora.retrieval.caches.passing_units import Passing, PassingUnits
from memora.retrieval.filters import NO_FILTER, Matching, Where, vector_scope
from memora.retrieval.types import SearchScope
from memora.store import terms as term_counts

# Filtered searches over at most this many units scan them exactly (see `semantic.nearest`;
# MEMORA_FILTER_EXACT_SCAN_MAX; 0: never).
EXACT_SCAN_MAX = 2000
# Broader filters are ranked exactly too while that is the cheaper way: an HNSW walk passes
# over about limit · agent / n units to find `limit` of the n that match, each costing about
# WALK_COST units of an exact scan, so the scan wins while n² ≤ WALK_COST · limit · agent;
# never above EXACT_SCAN_CAP units. Where the query service holds the filter's units
# (`caches.passing_units`) they are ranked in memory, exactly, up to
# EXACT_SCAN_CAP. The measurements behind both constants: docs/retrieval.md, "Exact scans".
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
    """How many units `semantic.nearest` may rank exactly for the scope's filter (0: walk the HNSW
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
    form that costs least both ways: read as one text rather than as rows, and sent back as
    one text rather than as a list psycopg dumps string by string (docs/retrieval.md, "Exact
    scans")."""

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
    (`caches.passing_units`: brought up to date in `conn`'s snapshot first)."""
    held = passing.read(conn, scope, at_most)
    return None if held is None else held_ranked(held, vector, limit)


def held_ranked(held: Passing, vector: np.ndarray, limit: int) -> ExactScan:
    return ExactScan(held.nearest(vector, limit), held.count, held.text, held.members)
