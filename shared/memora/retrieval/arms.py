"""The database side of the retrievers: semantic (HNSW), graph neighbours, temporal ranges, and
the hydration of fused candidates. Keyword retrieval (BM25) lives in `keyword.py`.

Every query is scoped by agent_id, the requested fact types and active status, composed by
`scope_where` on `memory_units` or `vector_scope` on `memory_vectors` (the one place for
conditions every retriever applies), and by the search's metadata filters (`where`, compiled
by `memora.retrieval.filters`). The k-nearest queries read `memory_vectors` (migration 0012:
the active embedded units' half-precision embeddings inline, with the filter columns);
hydration reads `memory_units`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg.rows import tuple_row

from memora.retrieval.filters import NO_FILTER, Where, in_time_range
from memora.retrieval.graph import Edge
from memora.retrieval.scoring import temporal_closeness
from memora.retrieval.types import Candidate
from memora.temporal import QueryTimeRange


def scope_where(alias: str) -> str:
    """The conditions every retriever puts on the units it returns (alias: the units' table),
    with its parameters from `scope_params`: the agent, the requested fact types, embedded,
    active (memora.lifecycle: superseded, forgotten and archived memories are not searched)."""
    return (
        f"{alias}.agent_id = %(agent)s AND {alias}.fact_type = ANY(%(types)s)"
        f" AND {alias}.embedding IS NOT NULL AND {alias}.status = 'active'"
    )


def vector_scope(alias: str) -> str:
    """`scope_where` on `memory_vectors`, whose rows are the embedded active units."""
    return f"{alias}.agent_id = %(agent)s AND {alias}.fact_type = ANY(%(types)s)"


def scope_params(agent_id: str, fact_types: Sequence[str]) -> dict[str, Any]:
    return {"agent": agent_id, "types": list(fact_types)}


@dataclass
class Matching:
    """Which of the agent's units pass a search's filters, as far as the search knows: all of
    them (`complete`, when the semantic retriever ranked the filter exactly) or the verdicts on
    those checked so far (`known`, kept over a broad filter's graph steps: see `passing`). Ids
    as text."""

    complete: frozenset[str] | None = None
    known: dict[str, bool] = field(default_factory=dict)
    share: float | None = None  # of the agent's units, by the planner's estimates

    @property
    def broad(self) -> bool:
        """Most units pass: the graph then checks a unit only as it comes up for exploration
        (memora.retrieval.graph's `admit`), not every target of every link it reads."""
        return self.complete is None and self.share is not None and self.share >= BROAD_SHARE


# Filtered searches over at most this many units scan them exactly (see `semantic`;
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
WALK_COST = 12
EXACT_SCAN_CAP = 20_000
# A filter that the planner expects half of the agent's units or more to pass is broad
# (`Matching.broad`). Narrower, most targets fail and a check per exploration would take
# many round trips (each failure hands its link on); checking every target in the links'
# query takes none.
BROAD_SHARE = 0.5


def plan_scan(
    conn: Connection[Any],
    agent_id: str,
    fact_types: Sequence[str],
    where: Where,
    limit: int,
    exact_max: int = EXACT_SCAN_MAX,
    matching: Matching | None = None,
) -> int:
    """How many units `semantic` may rank exactly for this filter (0: walk the HNSW index),
    from the planner's estimates, no rows read: it needs no query vector, so the retriever
    runs it while the query is being embedded. Sets `matching.share`."""
    if not where.sql or exact_max <= 0:
        return 0
    at_most, share = _exact_scan_bound(conn, agent_id, fact_types, where, limit, exact_max)
    if matching is not None:
        matching.share = share
    return at_most


def semantic(
    conn: Connection[Any],
    agent_id: str,
    fact_types: Sequence[str],
    vector: np.ndarray,
    limit: int,
    ef_search: int,
    min_similarity: float,
    where: Where = NO_FILTER,
    exact_max: int = EXACT_SCAN_MAX,
    matching: Matching | None = None,
    at_most: int | None = None,
    first: Callable[[list[tuple[UUID, float]]], None] | None = None,
    first_count: int = 0,
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

    `first`, for a filtered walk: called with the walk's first `first_count` units (fewer if
    that is all) as soon as they are read, while the walk goes on to `limit`. Those come from
    the walk's first pass over the index, in order: its nearest, before the rounds that look
    further out for the filter's sake (what the graph starts from)."""
    if at_most is None:
        at_most = plan_scan(conn, agent_id, fact_types, where, limit, exact_max, matching)
    exact = _exact(conn, agent_id, fact_types, vector, limit, where, at_most) if at_most else None
    if exact is not None:
        ranked, passed = exact
        if matching is not None:
            matching.complete = frozenset(passed)
        if len(passed) <= exact_max:
            return ranked
        return [(i, sim) for i, sim in ranked if sim >= min_similarity]
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        (str(ef_search),),
    )
    sql = f"""
        SELECT m.unit_id AS id, 1 - (m.embedding <=> %(v)s::halfvec) AS sim FROM memory_vectors m
        WHERE {vector_scope("m")} {where.sql}
        ORDER BY m.embedding <=> %(v)s::halfvec LIMIT %(limit)s
        """
    params = {"v": vector, "limit": limit, **scope_params(agent_id, fact_types), **where.params}
    if first is None or not where.sql:
        rows = conn.execute(sql, params, prepare=where.prepare).fetchall()
    else:
        # a cursor: the server stops after the first rows and sends them (a plain query's
        # rows would wait in its output buffer until the end)
        with conn.cursor(name="semantic_walk") as walk:
            walk.execute(sql, params)
            rows = walk.fetchmany(first_count)
            first([(r["id"], float(r["sim"])) for r in rows if r["sim"] >= min_similarity])
            rows += walk.fetchall()
    found = [(r["id"], float(r["sim"])) for r in rows if r["sim"] >= min_similarity]
    return sorted(found, key=lambda x: -x[1])  # relaxed order: re-sort


def _exact_scan_bound(
    conn: Connection[Any],
    agent_id: str,
    fact_types: Sequence[str],
    where: Where,
    limit: int,
    exact_max: int,
) -> tuple[int, float | None]:
    """How many units an exact scan may read for this filter (0: walk HNSW instead), and the
    share of the agent's units expected to pass (None when not estimated: at most
    `exact_max` pass)."""
    matching = _estimate(conn, agent_id, fact_types, where)
    if matching <= exact_max:
        return exact_max, None
    agent = _estimate(conn, agent_id, fact_types, NO_FILTER)
    share = min(matching / agent, 1.0) if agent else 1.0
    if matching <= EXACT_SCAN_CAP and matching**2 <= WALK_COST * limit * agent:
        return EXACT_SCAN_CAP, share
    return 0, share


def _estimate(
    conn: Connection[Any], agent_id: str, fact_types: Sequence[str], where: Where
) -> float:
    """How many of the agent's searchable units the planner expects to pass `where`: its
    statistics of the metadata column (containment is checked against the histogram's
    sample of documents) or of the turn index, no rows read. Under row-level security the
    estimate also counts the tenant condition, so with many tenants it runs low; `_exact`
    checks the true count."""
    row = conn.execute(
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM memory_vectors m "
        f"WHERE {vector_scope('m')} {where.sql}",
        {**scope_params(agent_id, fact_types), **where.params},
        prepare=False,
    ).fetchone()
    plan = row["QUERY PLAN"] if row else None
    return float(plan[0]["Plan"]["Plan Rows"]) if plan else math.inf


def _exact(
    conn: Connection[Any],
    agent_id: str,
    fact_types: Sequence[str],
    vector: np.ndarray,
    limit: int,
    where: Where,
    at_most: int,
    *,
    ids: bool = True,
) -> tuple[list[tuple[UUID, float]], list[str]] | None:
    """The `limit` units passing `where` most similar to `vector` and (`ids`) the ids of all
    that passed, or None when more than `at_most` pass (the estimate was low): then at most
    `at_most` + 1 rows were read. The ids come back as one comma-separated text (a few
    thousand in ~1 ms; as rows they cost twice that)."""
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
        {
            "v": vector, "cap": at_most + 1, "limit": limit,
            **scope_params(agent_id, fact_types), **where.params,
        },
        prepare=where.prepare,
    ).fetchone()  # fmt: skip
    if not row or row["n"] > at_most:
        return None
    best = zip(row["best"] or [], map(float, row["similarity"] or []), strict=True)
    return list(best), row["passed"].split(",") if row["passed"] else []


FILTERED_SCAN = 4  # filtered graph steps look at 4 · fanout links per unit


def links(
    conn: Connection[Any], ids: list[str], limit: int, where: Where = NO_FILTER
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `limit` links to active units (links join units of one agent
    only), strongest first, read by the index alone; with `where`, those of them to units
    that pass it, checked in the same query by one primary-key probe each. Ids travel as
    text (one comma-separated text out, which PostgreSQL parses faster than a text[]) and
    rows as tuples: graph retrieval reads thousands of links per search, and UUID objects
    and dict rows were most of its cost. Filtered, the query is prepared, unlike the other
    filtered ones: led by the ids, its plan is the same whatever the filter matches, and
    planning it cost as much as running it."""
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
            SELECT l.from_unit::text, l.to_unit::text, l.link_type, l.weight
            FROM unnest(string_to_array(%(ids)s, ',')::uuid[]) AS f(id)
            CROSS JOIN LATERAL (
                SELECT from_unit, to_unit, link_type, weight FROM memory_links
                WHERE from_unit = f.id AND NOT EXISTS (
                    SELECT 1 FROM memory_units x WHERE x.id = to_unit AND x.status <> 'active'
                )  -- the few inactive units: a small partial index
                ORDER BY weight DESC, to_unit LIMIT %(limit)s
            ) l {check}
            """,
            {"ids": ",".join(ids), "limit": limit, **where.params},
            prepare=True if where.sql else None,
        )
        .fetchall()
    )
    out: dict[str, list[Edge[str]]] = defaultdict(list)
    for source, target, link_type, weight in rows:  # each source's links, strongest first
        out[source].append((target, link_type, weight))
    return out


def neighbours(
    conn: Connection[Any],
    ids: list[str],
    fanout: int,
    where: Where = NO_FILTER,
    matching: Matching | None = None,
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `fanout` links; with filters, its strongest `fanout` to units
    that pass them, among its FILTERED_SCAN · fanout strongest links: checked against
    `matching.complete` (every unit that passes, known after an exact scan), else in the
    links' query."""
    if not where.sql:
        return links(conn, ids, fanout)
    keep = matching.complete if matching is not None else None
    if keep is None:
        found = links(conn, ids, FILTERED_SCAN * fanout, where)
        return {s: edges[:fanout] for s, edges in found.items()}
    found = links(conn, ids, FILTERED_SCAN * fanout)
    return {s: [e for e in edges if e[0] in keep][:fanout] for s, edges in found.items()}


def passing(
    conn: Connection[Any], ids: list[str], where: Where, known: dict[str, bool]
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
    agent_id: str,
    fact_types: Sequence[str],
    vector: np.ndarray,
    time_range: QueryTimeRange,
    limit: int,
    spread: int,
    decay: float,
    seed_similarity: float,
    min_similarity: float,
    where: Where = NO_FILTER,
    exact_max: int = EXACT_SCAN_MAX,
) -> list[tuple[UUID, float]]:
    """Seed 000 §3.1.4: units in the range with similarity ≥ `seed_similarity`, scored by
    closeness to the range's centre; then one step along temporal links to more units in
    the range (score · link weight · decay); finally only units with similarity ≥
    `min_similarity` stay. `vector` embeds the query without its time words. The seeds are
    the range's nearest units, found as `semantic` finds a filter's: the range is one more
    condition, ranked exactly or walked by the same estimates."""
    seeds = _temporal_seeds(
        conn, agent_id, fact_types, vector, time_range, limit, seed_similarity, where, exact_max
    )
    scores = {i: temporal_closeness(at, time_range.start, time_range.end) for i, at in seeds}
    if scores and spread > 0:
        params = {
            "v": vector, "start": time_range.start, "end": time_range.end,
            **scope_params(agent_id, fact_types), **where.params,
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
    agent_id: str,
    fact_types: Sequence[str],
    vector: np.ndarray,
    time_range: QueryTimeRange,
    limit: int,
    seed_similarity: float,
    where: Where,
    exact_max: int,
) -> list[tuple[UUID, datetime]]:
    """The `limit` units in the range nearest to `vector`, those of them with similarity ≥
    `seed_similarity`, and when each happened. A range holding few of the agent's units
    (counted by the planner through migration 0013's date indexes) is ranked exactly: the
    HNSW walk would pass over most of the agent to find them, which PostgreSQL's cost model
    for the walk does not see (a month of a two-year history at 100k: walked 11.4 ms, ranked
    exactly 3.3 ms)."""
    in_range = Where(
        f" AND {_IN_RANGE} {where.sql}",
        {"start": time_range.start, "end": time_range.end, **where.params},
    )
    at_most = plan_scan(conn, agent_id, fact_types, in_range, limit, exact_max)
    exact = (
        _exact(conn, agent_id, fact_types, vector, limit, in_range, at_most, ids=False)
        if at_most
        else None
    )
    if exact is not None:
        near = [i for i, sim in exact[0] if sim >= seed_similarity]
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
            **scope_params(agent_id, fact_types),
            **in_range.params,
        },
        prepare=False,
    ).fetchall()
    return [(r["id"], r["at"]) for r in rows]


# The units next to a unit in its document: the turns before and after it (or, in a
# transcript item cut into several units, its neighbours within the item).
_NEXT_TO = """
    n.document_pk = m.document_pk AND n.id <> m.id AND n.embedding IS NOT NULL
    AND ((n.item_index = m.item_index AND abs(n.seq - m.seq) = 1)
         OR abs(n.item_index - m.item_index) = 1)
"""


def hydrate(
    conn: Connection[Any],
    agent_id: str,
    fact_types: Sequence[str],
    ids: Sequence[UUID],
    vector: np.ndarray,
    keyword: tuple[str, dict[str, Any]],
    entity_ids: Sequence[UUID] = (),
) -> dict[UUID, Candidate]:
    """The candidates' rows (agent, fact types and active status checked again here) with their
    access counts, their BM25 score (`keyword`: the keyword retriever's LATERAL subquery and its
    parameters), their context: the best similarity to `vector` among the units next to them in
    their document, and whether they mention one of `entity_ids`. Read in binary, which spares
    parsing the embeddings' text form."""
    lateral, params = keyword
    rows = conn.execute(
        f"""
        SELECT m.id, m.text, m.context, m.fact_type, m.event_date, m.occurred_start,
               m.occurred_end, m.metadata, m.embedding, coalesce(a.access_count, 0) AS access_count,
               m.importance, m.category, coalesce(a.last_accessed_at, m.created_at) AS last_used,
               coalesce(kw.bm25, 0) AS bm25, coalesce(ctx.sim, 0) AS context_sim,
               EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = m.id
                       AND ue.entity_id = ANY(%(entities)s)) AS names_entity
        FROM memory_units m LEFT JOIN memory_access a ON a.unit_id = m.id
        LEFT JOIN LATERAL {lateral} kw ON true
        LEFT JOIN LATERAL (
            SELECT max(1 - (n.embedding <=> %(v)s)) AS sim FROM memory_units n WHERE {_NEXT_TO}
        ) ctx ON true
        WHERE m.id = ANY(%(ids)s) AND {scope_where("m")}
        """,
        {
            **params,
            **scope_params(agent_id, fact_types),
            "v": vector,
            "ids": list(ids),
            "entities": list(entity_ids),
        },
        binary=True,
    ).fetchall()
    return {
        r["id"]: Candidate(
            id=r["id"],
            text=r["text"],
            context=r["context"],
            fact_type=r["fact_type"],
            event_date=r["event_date"],
            occurred_start=r["occurred_start"],
            occurred_end=r["occurred_end"],
            metadata=r["metadata"] or {},
            access_count=int(r["access_count"]),
            embedding=np.asarray(r["embedding"].to_numpy(), dtype=np.float32),
            keyword=float(r["bm25"]),
            neighbours=float(r["context_sim"]),
            importance=float(r["importance"]),
            category=r["category"],
            last_used=r["last_used"],
            names_entity=bool(r["names_entity"]),
        )
        for r in rows
    }


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


def query_entities(
    conn: Connection[Any], agent_id: str, names: Sequence[str]
) -> dict[UUID, list[str]]:
    """The agent's entities whose normalised name or an alias is one of `names`: id → the
    names of it that matched."""
    if not names:
        return {}
    rows = conn.execute(
        """
        SELECT e.id, e.normalized_name, e.aliases FROM entities e
        WHERE e.agent_id = %(agent)s
          AND (e.normalized_name = ANY(%(names)s) OR e.aliases && %(names)s)
        """,
        {"agent": agent_id, "names": list(names)},
    ).fetchall()
    wanted = set(names)
    return {r["id"]: sorted(({r["normalized_name"], *r["aliases"]}) & wanted) for r in rows}


def entity_units(
    conn: Connection[Any],
    agent_id: str,
    fact_types: Sequence[str],
    entity_ids: Sequence[UUID],
    vector: np.ndarray,
    per_entity: int,
    min_similarity: float,
    where: Where = NO_FILTER,
) -> list[tuple[UUID, float]]:
    """For each entity, the `per_entity` units mentioning it most similar to `vector` (and
    passing the search's filters); a unit mentioning several keeps its similarity once. Best
    first."""
    rows = conn.execute(
        f"""
        SELECT u.id, max(u.sim) AS sim FROM unnest(%(entities)s::uuid[]) AS e(entity)
        CROSS JOIN LATERAL (
            SELECT m.unit_id AS id, 1 - (m.embedding <=> %(v)s::halfvec) AS sim
            FROM unit_entities ue JOIN memory_vectors m ON m.unit_id = ue.unit_id
            WHERE ue.entity_id = e.entity AND {vector_scope("m")} {where.sql}
            ORDER BY m.embedding <=> %(v)s::halfvec LIMIT %(per_entity)s
        ) u GROUP BY u.id
        """,
        {
            "entities": list(entity_ids), "v": vector, "per_entity": per_entity,
            **scope_params(agent_id, fact_types), **where.params,
        },
        prepare=where.prepare,
    ).fetchall()  # fmt: skip
    found = [(r["id"], float(r["sim"])) for r in rows if r["sim"] >= min_similarity]
    return sorted(found, key=lambda x: (-x[1], str(x[0])))
