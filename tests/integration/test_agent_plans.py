"""Statements whose best plan depends on the agent's size are planned for their agent every
time: in a table of many agents, a prepared statement soon gets one generic plan, the one
that suits the many small agents, and a large agent's search then takes it too
(bench/many_agents.py: the HNSW walk became a sort of the agent's every unit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from memora.retrieval.types import SearchScope
from tests.integration.memory_support import store_memory, unit_vector

pytestmark = pytest.mark.integration

DIM = 384


def test_the_semantic_walk_is_never_prepared(agent_conn: Any, agent_id: str) -> None:
    from memora.retrieval.arms import semantic

    conn = agent_conn
    rng = np.random.default_rng(5)
    for d in range(12):
        vector = unit_vector(rng.standard_normal(DIM))
        when = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=d)
        store_memory(conn, agent_id, vector, when, {}, f"memory {d}")
    conn.commit()
    scope = SearchScope("default", agent_id, ("world",))
    for _ in range(8):  # past psycopg's prepare threshold (5)
        with conn.transaction():
            found = semantic.nearest(
                conn, scope, vector=unit_vector(rng.standard_normal(DIM)), limit=5,
                ef_search=64, min_similarity=-1.0, at_most=0,
            )  # fmt: skip
        assert len(found) == 5
    prepared = conn.execute(
        "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE %s",
        ("%ORDER BY m.embedding <=>%",),
    ).fetchone()
    assert prepared["n"] == 0
