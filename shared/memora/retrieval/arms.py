"""The database side of the other retrievers: the graph's walk over links, temporal ranges.
Semantic retrieval (HNSW or exact) lives in `semantic.py`, keyword retrieval (BM25) in
`keyword.py`, the entity retriever's in `entities.py`, the hydration of fused candidates in
`fusion.py`.

Every query is scoped by the search's `SearchScope`: agent, requested fact types and active
status, composed by `filters.vector_scope` on `memory_vectors` (the one place for conditions
every retriever applies), and the search's metadata filters (`scope.where`, compiled once by
`memora.retrieval.filters`). The k-nearest queries read `memory_vectors`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from operator import itemgetter
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg.rows import tuple_row

from memora.nlp.temporal import QueryTimeRange
from memora.retrieval.filters import (
    NO_FILTER,
    Matching,
    Where,
    broad_count,
    in_time_range,
    vector_scope,
)
from memora.retrieval.graph import Edge, SpreadSettings, spread_activation
from memora.retrieval.held_links import STRONGEST, AgentLinks
from memora.retrieval.scoring import temporal_closeness
from memora.retrieval.semantic import EXACT_SCAN_MAX, exact_scan, plan_scan
from memora.retrieval.types import SearchScope

FILTERED_SCAN = 4  # filtered graph steps look at 4 · fanout links per unit
_target = itemgetter(0)  # an edge's target


def graph_walk(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    entry: dict[str, float],
    budget: int,
    fanout: int,
    spread: SpreadSettings,
    matching: Matching,
    held: AgentLinks | None = None,
) -> list[tuple[UUID, float]]:
    """The graph retriever: spreading activation from the entry points (ids as text) over the
    units that pass the search's filters, most active first. For a broad filter each unit is
    checked as it comes up for exploration, otherwise (and when the units failing a broad filter
    are known) each step's links are kept to the units that pass (see `neighbours`). `held`
    (the agent's links in memory, up to date) gives the links when there, but for a check of
    the filter in the links' query."""
    where = scope.where
    read = held.links if held is not None else _reader(conn)
    if matching.broad and matching.failing is None:  # broad: for filtered searches only
        found = spread_activation(
            entry,
            lambda ids: read(ids, FILTERED_SCAN * fanout),
            budget,
            spread,
            admit=lambda ids: passing(conn, ids, where=where, known=matching.known),
            fanout=fanout,
        )
    else:
        found = spread_activation(
            entry,
            lambda ids: neighbours(
                conn,
                ids,
                fanout=fanout,
                where=where,
                matching=matching,
                read=read,
                read_ahead=held is None,
            ),
            budget,
            spread,
        )
    return [(UUID(node), activation) for node, activation in found]


# each unit's strongest `limit` links to active units: `links` without a filter, or the held ones
ReadLinks = Callable[[list[str], int], dict[str, list[Edge[str]]]]


def _reader(conn: Connection[Any]) -> ReadLinks:
    return lambda ids, limit: links(conn, ids, limit=limit)


def links(
    conn: Connection[Any], ids: list[str], *, limit: int, where: Where = NO_FILTER
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `limit` links to active units (links join units of one agent
    only), strongest first, read by the index alone; with `where`, those of them to units
    that pass it, checked in the same query by one primary-key probe each. Ids travel as
    text (one comma-separated text out, which PostgreSQL parses faster than a text[]), and
    each unit's links come back as one row of three arrays, in binary: graph retrieval reads
    thousands of links per search, and a row, a UUID object or a parsed float per link were
    most of its cost. Weights are the stored REAL's exact value. Filtered, the query is
    prepared, unlike the other filtered ones: led by the ids, its plan is the same whatever
    the filter matches, and planning it cost as much as running it."""
    check = (
        f"CROSS JOIN LATERAL (SELECT 1 FROM memory_vectors m WHERE m.unit_id = l.to_unit"
        f" {where.sql} LIMIT 1) AS passes"
        if where.sql
        else ""
    )
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            f"""
            SELECT f.id::text, a.targets, a.types, a.weights
            FROM unnest(string_to_array(%(ids)s, ',')::uuid[]) AS f(id)
            CROSS JOIN LATERAL (  -- one unit's links, aggregated apart: no grouping of all
                SELECT array_agg(l.to_unit::text {STRONGEST}) AS targets,
                       array_agg(l.link_type {STRONGEST}) AS types,
                       array_agg(l.weight::float8 {STRONGEST}) AS weights
                FROM (
                    SELECT to_unit, link_type, weight FROM memory_links
                    WHERE from_unit = f.id AND NOT EXISTS (
                        SELECT 1 FROM memory_units x WHERE x.id = to_unit AND x.status <> 'active'
                    )  -- the few inactive units: a small partial index
                    ORDER BY weight DESC, to_unit, link_type LIMIT %(limit)s
                ) l {check}
            ) a
            WHERE a.targets IS NOT NULL
            """,
            {"ids": ",".join(ids), "limit": limit, **where.params},
            prepare=True if where.sql else None,
            binary=True,
        )
        .fetchall()
    )
    return {
        source: list(zip(targets, types, weights, strict=True))
        for source, targets, types, weights in rows
    }


def neighbours(
    conn: Connection[Any],
    ids: list[str],
    *,
    fanout: int,
    where: Where = NO_FILTER,
    matching: Matching | None = None,
    read: ReadLinks | None = None,
    read_ahead: bool = True,
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `fanout` links; with filters, its strongest `fanout` to units
    that pass them, among its FILTERED_SCAN · fanout strongest links: checked against
    `matching.complete` (every unit that passes, known after an exact scan) or
    `matching.failing` (every unit that fails a broad filter, when held), else in the links'
    query. `read`: where the unfiltered links come from (the held ones), by default `links`;
    `read_ahead`: against failing units, read the links a broad filter's share may need
    beyond `fanout` at once (a second read is a round trip; of held links, it costs less than
    reading ahead for every unit: 2 of 20 more, the graph ~0.1 ms of CPU a search)."""
    read = read or _reader(conn)
    if not where.sql:
        return read(ids, fanout)
    keep = matching.complete if matching is not None else None
    failing = matching.failing if matching is not None else None
    if keep is None and failing is not None:
        share = matching.share if matching is not None and matching.share else 0.0
        limit = broad_count(fanout, share, len(failing)) if read_ahead else fanout
        return _links_passing(read, ids, fanout=fanout, failing=failing.text, limit=limit)
    if keep is None:
        found = links(conn, ids, limit=FILTERED_SCAN * fanout, where=where)
        return {s: edges[:fanout] for s, edges in found.items()}
    found = read(ids, FILTERED_SCAN * fanout)
    return {s: [e for e in edges if e[0] in keep][:fanout] for s, edges in found.items()}


def _links_passing(
    read: ReadLinks, ids: list[str], *, fanout: int, failing: frozenset[str], limit: int
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `fanout` links to units not in `failing` (few, under a broad
    filter), among its FILTERED_SCAN · fanout strongest, as `neighbours` keeps them: from its
    strongest `limit`, read further for the units that had more failing among them."""
    most = FILTERED_SCAN * fanout
    limit = min(limit, most)
    found: dict[str, list[Edge[str]]] = {}
    short = []
    for source, edges in read(ids, limit).items():
        if failing.isdisjoint(map(_target, edges)):  # mostly: checked in C
            found[source] = edges[:fanout]
            continue
        found[source] = [e for e in edges if e[0] not in failing][:fanout]
        if len(found[source]) < fanout and len(edges) == limit < most:
            short.append(source)
    if short:
        for source, edges in read(short, most).items():
            found[source] = [e for e in edges if e[0] not in failing][:fanout]
    return {source: edges for source, edges in found.items() if edges}


def passing(
    conn: Connection[Any], ids: list[str], *, where: Where, known: dict[str, bool]
) -> set[str]:
    """Which of these units pass `where`: those not in `known` (the verdicts so far in one
    search) checked in one query, one primary-key probe each (with `= ANY` the planner may
    AND the ids with the filter's whole index bitmap instead), their verdicts added. The
    query is prepared, unlike the other filtered ones: led by the ids, its plan is the same
    whatever the filter matches, and planning it cost as much as running it (300 ids: 0.6
    ms each); the ids travel as one text, which PostgreSQL parses faster than a text[]."""
    unseen = [i for i in ids if i not in known]
    if unseen:
        found = {
            r[0]
            for r in conn.cursor(row_factory=tuple_row).execute(
                f"SELECT m.unit_id::text FROM unnest(string_to_array(%(ids)s, ',')::uuid[])"
                f" AS t(id) JOIN memory_vectors m ON m.unit_id = t.id WHERE true {where.sql}",
                {"ids": ",".join(unseen), **where.params},
                prepare=True,
            )
        }
        known.update((i, i in found) for i in unseen)
    return {i for i in ids if known[i]}


# A unit lies in the range by when it happened (occurred_start/end, from the extractor) or,
# lacking that, by when it was said (event_date).
_IN_RANGE = in_time_range("m", "%(start)s", "%(end)s")
_WHEN = (
    "coalesce(m.occurred_start + (coalesce(m.occurred_end, m.occurred_start) - m.occurred_start)"
    " / 2, m.event_date) AS at"
)


def temporal(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    time_range: QueryTimeRange,
    limit: int,
    spread: int,
    decay: float,
    seed_similarity: float,
    min_similarity: float,
    exact_max: int = EXACT_SCAN_MAX,
) -> list[tuple[UUID, float]]:
    """Seed 000 §3.1.4: units in the range with similarity ≥ `seed_similarity`, scored by
    closeness to the range's centre; then one step along temporal links to more units in
    the range (score · link weight · decay); finally only units with similarity ≥
    `min_similarity` stay. `vector` embeds the query without its time words. The seeds are
    the range's nearest units, found as `semantic.nearest` finds a filter's: the range is one more
    condition, ranked exactly or walked by the same estimates."""
    seeds = _temporal_seeds(
        conn, scope, vector=vector, time_range=time_range, limit=limit,
        seed_similarity=seed_similarity, exact_max=exact_max,
    )  # fmt: skip
    scores = {i: temporal_closeness(at, time_range.start, time_range.end) for i, at in seeds}
    where = scope.where
    if scores and spread > 0:
        params = {
            "v": vector, "start": time_range.start, "end": time_range.end,
            **scope.params, **where.params,
        }  # fmt: skip
        near = conn.execute(
            f"""
            SELECT l.from_unit, l.weight, m.unit_id AS id,
                   1 - (m.embedding <=> %(v)s::halfvec) AS sim
            FROM memory_links l JOIN memory_vectors m ON m.unit_id = l.to_unit
            WHERE l.from_unit = ANY(%(seeds)s) AND l.link_type = 'temporal'
              AND {vector_scope("m")} AND {_IN_RANGE} {where.sql}
            ORDER BY l.weight DESC LIMIT %(spread)s
            """,
            {**params, "seeds": list(scores), "spread": spread},
            prepare=where.prepare,
        ).fetchall()
        for r in near:
            if r["sim"] < min_similarity:
                continue
            offered = scores[r["from_unit"]] * float(r["weight"]) * decay
            if offered > scores.get(r["id"], 0.0):
                scores[r["id"]] = offered
    # seeds passed the stricter seed threshold; neighbours were filtered above
    return sorted(scores.items(), key=lambda x: (-x[1], str(x[0])))


def _temporal_seeds(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    vector: np.ndarray,
    time_range: QueryTimeRange,
    limit: int,
    seed_similarity: float,
    exact_max: int,
) -> list[tuple[UUID, datetime]]:
    """The `limit` units in the range nearest to `vector`, those of them with similarity ≥
    `seed_similarity`, and when each happened. A range holding few of the agent's units
    (counted by the planner through migration 0013's date indexes) is ranked exactly: the
    HNSW walk would pass over most of the agent to find them, which PostgreSQL's cost model
    for the walk does not see (a month of a two-year history at 100k: walked 11.4 ms, ranked
    exactly 3.3 ms)."""
    where = scope.where
    in_range = Where(
        f" AND {_IN_RANGE} {where.sql}",
        {"start": time_range.start, "end": time_range.end, **where.params},
    )
    ranged = replace(scope, where=in_range)
    at_most = plan_scan(conn, ranged, limit=limit, exact_max=exact_max)
    exact = (
        exact_scan(conn, ranged, vector=vector, limit=limit, at_most=at_most, ids=False)
        if at_most
        else None
    )
    if exact is not None:
        near = [i for i, sim in exact.ranked if sim >= seed_similarity]
        rows = conn.execute(
            f"SELECT m.unit_id AS id, {_WHEN} FROM memory_vectors m WHERE m.unit_id = ANY(%(ids)s)",
            {"ids": near},
        ).fetchall()
        at = {r["id"]: r["at"] for r in rows}
        return [(i, at[i]) for i in near if i in at]
    conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
    rows = conn.execute(
        f"""
        SELECT * FROM (
            SELECT m.unit_id AS id, {_WHEN}, 1 - (m.embedding <=> %(v)s::halfvec) AS sim
            FROM memory_vectors m
            WHERE {vector_scope("m")} {in_range.sql}
            ORDER BY m.embedding <=> %(v)s::halfvec LIMIT %(limit)s
        ) s WHERE sim >= %(seed)s
        """,
        {
            "v": vector,
            "limit": limit,
            "seed": seed_similarity,
            **scope.params,
            **in_range.params,
        },
        prepare=False,
    ).fetchall()
    return [(r["id"], r["at"]) for r in rows]


def record_access(conn: Connection[Any], counts: Mapping[UUID, int], at: datetime) -> int:
    """Add to the access counts of these units (units deleted meanwhile are skipped)."""
    ids = sorted(counts, key=str)  # one lock order for every writer
    cur = conn.execute(
        """
        INSERT INTO memory_access (unit_id, access_count, last_accessed_at)
        SELECT u.id, u.n, %(at)s FROM unnest(%(ids)s::uuid[], %(n)s::int[]) AS u(id, n)
        JOIN memory_units m ON m.id = u.id ORDER BY u.id
        ON CONFLICT (unit_id) DO UPDATE
        SET access_count = memory_access.access_count + EXCLUDED.access_count,
            last_accessed_at = EXCLUDED.last_accessed_at
        """,
        {"ids": ids, "n": [counts[i] for i in ids], "at": at},
    )
    return max(cur.rowcount, 0)
