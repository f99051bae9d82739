"""The graph retriever's read of the links (`graph.links`) on real PostgreSQL, checked against
the rows in Python: each unit's strongest links to active units, strongest first (ties by the
target's id, then the link's type: one target may have two links of one weight), with their
types and the stored weights exactly, at most `limit` of them."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from memora.retrieval.arms import graph
from tests.integration.memory_support import add_turns

pytestmark = pytest.mark.integration

TYPES = ["temporal", "semantic", "entity", "causes", "explicit"]


def test_links_are_the_strongest_to_active_units(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    rng = np.random.default_rng(13)
    units = [uuid.UUID(u) for u in add_turns(conn, agent_id, rng, 30)]
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
            # a third of the targets also by a second type with the same weight (as an entity
            # and a temporal link, both 1.0), which only the type orders
            kinds = rng.choice(TYPES, size=1 + int(rng.random() < 1 / 3), replace=False)
            for link_type in map(str, kinds):
                conn.execute(
                    "INSERT INTO memory_links (from_unit, to_unit, link_type, weight)"
                    " VALUES (%s, %s, %s, %s)",
                    (source, units[target], link_type, weight),
                )
                if units[target] not in inactive:
                    rows.setdefault(source, []).append((str(units[target]), link_type, weight))
    conn.commit()

    assert any(  # a pair that only the type orders
        len({(t, w) for t, _, w in edges}) < len(edges) for edges in rows.values()
    )
    for limit in range(1, 41):  # every cut, those between such a pair included
        found = graph.links(conn, [str(u) for u in units[:5]], limit=limit)
        expected = {
            str(source): sorted(edges, key=lambda e: (-e[2], e[0], e[1]))[:limit]
            for source, edges in rows.items()
        }
        assert found == expected, limit  # units[4] has no links: no entry
