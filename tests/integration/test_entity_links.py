"""The link stage's entity links (`links.build_links`) on real PostgreSQL, checked against the
rows in Python: for each entity a new unit mentions, the `k` other units mentioning it nearest in
time (ties by id), stored both ways. Dates come from a few values, so that many mentions tie
(the turns of a conversation posted whole share its date); a unit's date changed afterwards is
followed (`unit_entities.event_date`, migration 0031)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from memora.store.links import LinkSettings, build_links
from tests.integration.memory_support import add_entity, add_turns

pytestmark = pytest.mark.integration

K = 3
SETTINGS = LinkSettings(
    temporal_window_hours=1.0, temporal_per_unit=2, semantic_threshold=2.0,
    semantic_per_unit=0, entity_per_entity=K,
)  # fmt: skip


def _expected(
    new: list[uuid.UUID], dates: dict[uuid.UUID, datetime], mentions: dict[uuid.UUID, set[Any]]
) -> set[tuple[uuid.UUID, uuid.UUID]]:
    pairs = set()
    for unit in new:
        for entity in mentions[unit]:
            others = [o for o in dates if o != unit and entity in mentions[o]]
            others.sort(key=lambda o: (abs((dates[o] - dates[unit]).total_seconds()), o))
            for other in others[:K]:
                pairs |= {(unit, other), (other, unit)}
    return pairs


def _entity_links(conn: Any, units: list[uuid.UUID]) -> set[tuple[uuid.UUID, uuid.UUID]]:
    rows = conn.execute(
        "SELECT from_unit, to_unit FROM memory_links"
        " WHERE link_type = 'entity' AND from_unit = ANY(%s)",
        (units,),
    ).fetchall()
    return {(r["from_unit"], r["to_unit"]) for r in rows}


def test_entity_links_are_the_nearest_mentions_in_time(agent_conn: Any, agent_id: str) -> None:
    conn = agent_conn
    rng = np.random.default_rng(31)
    units = [uuid.UUID(u) for u in add_turns(conn, agent_id, rng, 60)]
    start = datetime(2024, 1, 1, tzinfo=UTC)
    dates = {u: start + timedelta(hours=int(rng.integers(0, 8))) for u in units}
    for unit, when in dates.items():
        conn.execute("UPDATE memory_units SET event_date = %s WHERE id = %s", (when, unit))
    entities = [add_entity(conn, agent_id, name) for name in ("Ana", "Ben", "Caro")]
    mentions: dict[uuid.UUID, set[Any]] = {u: set() for u in units}
    for unit in units:
        for entity in entities:
            if rng.random() < 0.5:
                mentions[unit].add(entity)
                conn.execute(
                    "INSERT INTO unit_entities (unit_id, entity_id, mention) VALUES (%s, %s, 'x')",
                    (unit, entity),
                )
    new = units[::7]
    build_links(conn, new, SETTINGS)
    assert _entity_links(conn, units) == _expected(new, dates, mentions)

    # a unit's date changed: its mentions follow, and new links are read at the new date
    moved = next(u for u in units[1:] if mentions[u] and u not in new)
    dates[moved] = start + timedelta(hours=3, minutes=30)
    conn.execute("UPDATE memory_units SET event_date = %s WHERE id = %s", (dates[moved], moved))
    stored = conn.execute(
        "SELECT DISTINCT event_date FROM unit_entities WHERE unit_id = %s", (moved,)
    ).fetchall()
    assert [r["event_date"] for r in stored] == [dates[moved]]
    conn.execute("DELETE FROM memory_links WHERE from_unit = ANY(%s)", (units,))
    build_links(conn, [moved], SETTINGS)
    assert _entity_links(conn, units) == _expected([moved], dates, mentions)
    conn.rollback()
