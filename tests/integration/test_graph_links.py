"""The graph retriever's read of the links (`arms.links`) on real PostgreSQL, checked against
the rows in Python: each unit's strongest links to active units, strongest first (ties by the
target's id), with their types and the stored weights exactly, at most `limit` of them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from memora.retrieval import arms
from tests.integration.memory_support import unit_vector

pytestmark = pytest.mark.integration

DIM = 384
TYPES = ["temporal", "semantic", "entity", "causes", "explicit"]


def test_links_are_the_strongest_to_active_units(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    rng = np.random.default_rng(13)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    units = [uuid.uuid4() for _ in range(30)]
    for n, unit in enumerate(units):
        when = start + timedelta(minutes=n)
        conn.execute(
            "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,"
            " mentioned_at) VALUES (%s, %s, 'turn', %s, 'world', %s, %s)",
            (unit, agent_id, unit_vector(rng.standard_normal(DIM)), when, when),
        )
    inactive = set(units[25:])
    conn.execute(
        "UPDATE memory_units SET status = 'forgotten' WHERE id = ANY(%s)", (list(inactive),)
    )
    rows: dict[uuid.UUID, list[tuple[str, str, float]]] = {}
    for source in units[:4]:
        for target in rng.choice(len(units), size=18, replace=False):
            if units[target] == source:
                continue
            # weights from a few values, so that ties (broken by the target's id) occur
            weight = float(np.float32(rng.choice([0.3, 0.55, 0.8123, 1.0, 2.5])))
            link_type = str(rng.choice(TYPES))
            conn.execute(
                "INSERT INTO memory_links (from_unit, to_unit, link_type, weight)"
                " VALUES (%s, %s, %s, %s)",
                (source, units[target], link_type, weight),
            )
            if units[target] not in inactive:
                rows.setdefault(source, []).append((str(units[target]), link_type, weight))
    conn.commit()

    for limit in (3, 8, 40):
        found = arms.links(conn, [str(u) for u in units[:5]], limit=limit)
        expected = {
            str(source): sorted(edges, key=lambda e: (-e[2], e[0]))[:limit]
            for source, edges in rows.items()
        }
        assert found == expected, limit  # units[4] has no links: no entry
