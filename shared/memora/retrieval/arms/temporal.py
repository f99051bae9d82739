"""The temporal-graph retriever (seed 000 §3.1.4): the units in the query's time range nearest to
its topic, scored by closeness to the range's centre, and one step along their temporal links."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.nlp.temporal import QueryTimeRange, strip_time_expression
from memora.retrieval.arms.base import Arm, Search, timed
from memora.retrieval.arms.exact import EXACT_SCAN_MAX, exact_scan, plan_scan
from memora.retrieval.filters import Where, in_time_range, vector_scope
from memora.retrieval.scoring import temporal_closeness
from memora.retrieval.types import ArmResult, SearchScope

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
    the range's nearest units, found as the semantic retriever finds a filter's: the range is
    one more condition, ranked exactly or walked by the same estimates."""
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
    for the walk does not see (docs/retrieval.md, "The retrievers")."""
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


class TemporalArm(Arm):
    """The temporal-graph retriever, when the query states a time constraint; it ranks by the
    query without its time expression (its text, embedded with the query)."""

    name = "temporal"
    embeds_own = True
    dated = True

    def skip(self, search: Search) -> str | None:
        return "no time constraint in the query" if search.time_range is None else None

    def retrieve(self, search: Search) -> ArmResult:
        time_range = search.time_range
        assert time_range is not None  # `skip` otherwise
        search.give_text(self.name, strip_time_expression(search.query, time_range))
        vector = search.vector(self.name)
        assert vector is not None
        s = self.settings
        with self.pool.tenant_connection(search.scope.tenant_id) as conn:
            return timed(
                self.name,
                lambda: temporal(
                    conn, search.scope, vector=vector, time_range=time_range,
                    limit=search.per_arm, spread=search.budget, decay=s.graph_decay,
                    seed_similarity=s.temporal_seed_similarity,
                    min_similarity=s.temporal_min_similarity, exact_max=s.filter_exact_scan_max,
                ),
            )  # fmt: skip
