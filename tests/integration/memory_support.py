"""Embedded memories written straight into `memory_units`, for the retrievers' tests on real
PostgreSQL (the triggers fill `memory_vectors`, `memory_search` and the rest)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

DIM = 384  # the schema's embedding dimension


def unit_vector(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def add_turns(conn: Any, agent_id: str, rng: np.random.Generator, n: int) -> list[str]:
    """`n` world units of the agent a minute apart with random unit embeddings (not
    committed); their ids as text."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    units = [str(uuid.uuid4()) for _ in range(n)]
    for i, unit in enumerate(units):
        when = start + timedelta(minutes=i)
        conn.execute(
            "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
            " mentioned_at) VALUES (%s, %s, 'turn', %s, 'world', %s, %s)",
            (unit, agent_id, unit_vector(rng.standard_normal(DIM)), when, when),
        )
    return units


def store_memory(
    conn: Any, agent_id: str, vector: np.ndarray, when: datetime, metadata: dict[str, Any],
    text: str,
) -> uuid.UUID:  # fmt: skip
    """A world fact with this embedding, said and happened at `when`; its id."""
    unit = uuid.uuid4()
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
        " mentioned_at, metadata) VALUES (%s, %s, %s, %s, 'world', %s, %s, %s)",
        (unit, agent_id, text, vector, when, when, Jsonb(metadata)),
    )
    return unit


def add_entity(conn: Any, agent_id: str, name: str, kind: str = "PERSON") -> uuid.UUID:
    """A resolved entity of the agent (not committed); its id."""
    row = conn.execute(
        "INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type,"
        " first_seen, last_seen) VALUES (%s, %s, %s, %s, now(), now()) RETURNING id",
        (agent_id, name, name.lower(), kind),
    ).fetchone()
    return row["id"]  # type: ignore[no-any-return]
