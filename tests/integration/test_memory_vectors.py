"""The read path's vector table (migration 0012): `memory_vectors` holds the searchable units
(embedded, active) with their filter columns and a half-precision copy of the embedding, kept
by triggers on `memory_units` in the transaction that changes them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.integration

WHEN = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture()
def conn(pool: Any, agent_id: str) -> Iterator[Any]:
    with pool.connection() as c:
        c.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent_id,))
        c.commit()
        yield c
        c.execute("DELETE FROM memory_units WHERE agent_id = %s", (agent_id,))
        c.execute("DELETE FROM agents WHERE agent_id = %s", (agent_id,))
        c.commit()


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def _row(conn: Any, unit: uuid.UUID) -> dict[str, Any] | None:
    return conn.execute(  # type: ignore[no-any-return]
        "SELECT v.agent_id, v.fact_type, v.metadata, v.event_date, v.occurred_start,"
        " 1 - (v.embedding <=> m.embedding::halfvec) AS same,"
        " (v.embedding::vector <=> m.embedding) AS drift"
        " FROM memory_vectors v JOIN memory_units m ON m.id = v.unit_id WHERE v.unit_id = %s",
        (unit,),
    ).fetchone()


def test_the_vector_table_follows_the_searchable_units(conn: Any, agent_id: str) -> None:
    unit = uuid.uuid4()
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, fact_type, event_date, mentioned_at,"
        " metadata) VALUES (%s, %s, 'Alice adopted a puppy', 'world', %s, %s, %s)",
        (unit, agent_id, WHEN, WHEN, '{"scene": "s1"}'),
    )
    assert _row(conn, unit) is None  # not embedded yet: not searchable
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (_vector(1), unit))
    row = _row(conn, unit)
    assert row is not None
    assert (row["agent_id"], row["fact_type"], row["metadata"]) == (
        agent_id,
        "world",
        {"scene": "s1"},
    )
    assert row["drift"] < 1e-5  # cosine distance to the float4 embedding
    conn.execute(
        'UPDATE memory_units SET metadata = \'{"scene": "s2"}\', occurred_start = %s WHERE id = %s',
        (WHEN, unit),
    )
    row = _row(conn, unit)
    assert row is not None and row["metadata"] == {"scene": "s2"} and row["occurred_start"] == WHEN
    for status, searchable in (("forgotten", False), ("active", True), ("archived", False)):
        conn.execute(
            "UPDATE memory_units SET status = %s, status_at = now() WHERE id = %s",
            (status, unit),
        )
        assert (_row(conn, unit) is not None) is searchable, status
    conn.execute("UPDATE memory_units SET status = 'active' WHERE id = %s", (unit,))
    conn.execute("UPDATE memory_units SET embedding = NULL WHERE id = %s", (unit,))
    assert _row(conn, unit) is None
    other = uuid.uuid4()
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
        " mentioned_at) VALUES (%s, %s, 'Bob sold a kayak', %s, 'world', %s, %s)",
        (other, agent_id, _vector(2), WHEN, WHEN),
    )
    assert _row(conn, other) is not None  # embedded at insert
    conn.execute("DELETE FROM memory_units WHERE id = %s", (other,))
    assert _row(conn, other) is None
    conn.commit()
