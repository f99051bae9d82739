"""The history retriever: superseded memories, only in a search with a validity window (the
request's `as_of`, or a past period the query names; `memora.retrieval.validity`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.retrieval.arms.base import Arm, Search, timed
from memora.retrieval.types import ArmResult, SearchScope
from memora.retrieval.validity import OVERLAPS, SUPERSEDED, Window


def history(
    conn: Connection[Any],
    scope: SearchScope,
    window: Window,
    *,
    vector: np.ndarray,
    limit: int,
    min_similarity: float,
) -> list[tuple[UUID, float]]:
    """The `history` retriever: the agent's superseded memories whose window overlaps
    `window`, passing the search's filters, nearest to `vector` first (exact)."""
    where = scope.where
    rows = conn.execute(
        f"""
        SELECT m.id, 1 - (m.embedding <=> %(v)s) AS sim FROM memory_units m
        WHERE m.agent_id = %(agent)s AND {SUPERSEDED.format(a="m")}
          AND m.fact_type = ANY(%(types)s) AND m.embedding IS NOT NULL
          AND {OVERLAPS.format(a="m")} {where.sql}
        ORDER BY m.embedding <=> %(v)s LIMIT %(k)s
        """,
        {**where.params, **scope.params, **window.params, "v": vector, "k": limit},
        prepare=where.prepare,
    ).fetchall()
    return [(r["id"], float(r["sim"])) for r in rows if r["sim"] >= min_similarity]


class HistoryArm(Arm):
    """Runs only in a search with a validity window, and is absent from the trace otherwise."""

    name = "history"
    listed_when_skipped = False
    dated = True

    def skip(self, search: Search) -> str | None:
        return "no validity window" if search.window is None else None

    def retrieve(self, search: Search) -> ArmResult:
        window = search.window
        assert window is not None  # `skip` otherwise
        vector = search.query_vector()
        with self.pool.tenant_connection(search.scope.tenant_id, autocommit=True) as conn:
            return timed(
                self.name,
                lambda: history(
                    conn, search.scope, window, vector=vector, limit=search.per_arm,
                    min_similarity=self.settings.semantic_min_similarity,
                ),
            )  # fmt: skip
