"""The agents' links held in the query service (`memora.retrieval.caches.agent_links`) on real
PostgreSQL: after the background read and through every kind of change (links added or
strengthened, units forgotten, superseded or deleted, a unit back to active, links deleted),
each unit's strongest links are those the database's read (`graph.links`) gives; every change
is taken in place but a unit back to active, which makes the search read the database until a
new read."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from memora.retrieval.arms import graph
from memora.retrieval.caches.agent_links import AgentLinks, HeldLinks
from tests.conftest import wait_until
from tests.integration.memory_support import add_turns

pytestmark = pytest.mark.integration

TYPES = ["temporal", "semantic", "entity", "causes", "explicit"]
TENANT = "default"


def _link(conn: Any, rng: np.random.Generator, sources: list[str], targets: list[str]) -> None:
    """Links from each source to a dozen targets, weights from a few values (ties), a third of
    the targets by two types with one weight; an existing link keeps the stronger weight."""
    for source in sources:
        for target in rng.choice(targets, size=min(12, len(targets)), replace=False):
            if target == source:
                continue
            weight = float(np.float32(rng.choice([0.3, 0.55, 0.8123, 1.0, 2.5])))
            for kind in rng.choice(TYPES, size=1 + int(rng.random() < 1 / 3), replace=False):
                conn.execute(
                    "INSERT INTO memory_links (from_unit, to_unit, link_type, weight)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (from_unit, to_unit, link_type)"
                    " DO UPDATE SET weight = GREATEST(memory_links.weight, EXCLUDED.weight)",
                    (source, str(target), str(kind), weight),
                )
    conn.commit()


def _current(held: HeldLinks, pool: Any, agent_id: str) -> AgentLinks:
    def read() -> AgentLinks | None:
        with pool.tenant_connection(TENANT, autocommit=True) as conn:
            return held.current(conn, TENANT, agent_id)

    found: AgentLinks = wait_until(read, timeout=30, interval=0.05)
    return found


def _assert_as_database(links: AgentLinks, pool: Any, units: list[str]) -> None:
    ids = [*units, str(uuid.uuid4())]  # and one unknown
    with pool.tenant_connection(TENANT, autocommit=True) as conn:
        for limit in (1, 2, 5, 12, 40):
            assert links.links(ids, limit) == graph.links(conn, ids, limit=limit), limit


def test_held_links_stay_the_database_links_through_changes(
    pool: Any, agent_conn: Any, agent_id: str
) -> None:
    conn, rng = agent_conn, np.random.default_rng(29)
    units = add_turns(conn, agent_id, rng, 40)
    _link(conn, rng, units[:30], units)
    inactive = units[34:]
    conn.execute("UPDATE memory_units SET status = 'forgotten' WHERE id = ANY(%s)", (inactive,))
    conn.commit()
    held = HeldLinks(pool, 64 << 20, 600)
    try:
        with pool.tenant_connection(TENANT, autocommit=True) as read:
            assert held.current(read, TENANT, agent_id) is None  # read in the background
        first = _current(held, pool, agent_id)
        assert first.inactive == frozenset(inactive)
        _assert_as_database(first, pool, units)

        # new units linked both ways, old links strengthened: taken in place
        new = add_turns(conn, agent_id, rng, 5)
        _link(conn, rng, new + units[:10], units + new)
        assert _current(held, pool, agent_id) is first
        assert first.changed
        _assert_as_database(first, pool, units + new)

        # units forgotten, superseded and deleted: dropped in place, links to them left out
        conn.execute("UPDATE memory_units SET status = 'forgotten' WHERE id = %s", (units[0],))
        conn.commit()
        conn.execute("UPDATE memory_units SET status = 'superseded' WHERE id = %s", (units[2],))
        conn.execute(  # a metadata change: still active, kept
            "UPDATE memory_units SET metadata = '{\"k\": 1}' WHERE id = %s", (units[3],)
        )
        conn.commit()
        deleted = new[-1]
        conn.execute("DELETE FROM memory_units WHERE id = %s", (deleted,))
        conn.commit()
        again = _current(held, pool, agent_id)
        assert again is first
        assert {units[0], units[2], deleted} <= again.inactive and units[3] not in again.inactive
        _assert_as_database(again, pool, units + new)

        # a unit back to active (the links to it count again): read again
        conn.execute("UPDATE memory_units SET status = 'active' WHERE id = %s", (inactive[0],))
        conn.commit()
        restored = _current(held, pool, agent_id)
        assert restored is not again
        assert inactive[0] not in restored.inactive
        _assert_as_database(restored, pool, units + new)

        # links deleted: their sources' lists read again in place
        conn.execute("DELETE FROM memory_links WHERE from_unit = %s", (units[1],))
        conn.execute("DELETE FROM memory_links WHERE from_unit = %s AND link_type = 'temporal'",
                     (units[4],))  # fmt: skip
        conn.commit()
        last = _current(held, pool, agent_id)
        assert last is restored
        assert units[1] not in last.links([units[1]], 40)
        _assert_as_database(last, pool, units + new)
    finally:
        held.close()


def test_an_agent_larger_than_the_cache_is_not_held(
    pool: Any, agent_conn: Any, agent_id: str
) -> None:
    conn, rng = agent_conn, np.random.default_rng(7)
    units = add_turns(conn, agent_id, rng, 20)
    _link(conn, rng, units, units)
    held = HeldLinks(pool, 1024, 600)  # smaller than any agent's links
    try:
        with pool.tenant_connection(TENANT, autocommit=True) as read:
            assert held.current(read, TENANT, agent_id) is None
            wait_until(lambda: not held.reading, timeout=30, interval=0.05)
            assert held.current(read, TENANT, agent_id) is None
            assert not held.reading  # not read again
    finally:
        held.close()


def test_link_removals_keep_each_tenants_latest(pool: Any, agent_conn: Any, agent_id: str) -> None:
    from memora.store import vector_removals

    conn, rng = agent_conn, np.random.default_rng(3)
    units = add_turns(conn, agent_id, rng, 6)
    _link(conn, rng, units, units)
    for unit in units[:3]:  # three statements, three rows
        conn.execute("DELETE FROM memory_links WHERE from_unit = %s", (unit,))
        conn.commit()
    latest = conn.execute(
        "SELECT max(removed) AS m FROM link_removals WHERE tenant_id = %s", (TENANT,)
    ).fetchone()["m"]
    vector_removals.compact_links(conn)
    conn.commit()
    rows = conn.execute(
        "SELECT removed FROM link_removals WHERE tenant_id = %s", (TENANT,)
    ).fetchall()
    assert [r["removed"] for r in rows] == [latest]
    # the latest row no longer stands for those dropped: a holder older than them reads whole
    assert (
        conn.execute("SELECT units FROM link_removals WHERE tenant_id = %s", (TENANT,)).fetchone()[
            "units"
        ]
        is None
    )


def test_filtered_walks_keep_the_held_links_as_the_databases(
    pool: Any, agent_conn: Any, agent_id: str
) -> None:
    """Under a filter whose passing units are known (an exact scan) or whose failing ones are
    (a broad filter held), each unit's strongest `fanout` links to passing units come from the
    held links as from the database's (the failing ones' read further where many fail)."""
    from memora.retrieval.caches.agent_links import read_whole
    from memora.retrieval.filters import Matching, UnitSet, Where

    conn, rng = agent_conn, np.random.default_rng(11)
    units = add_turns(conn, agent_id, rng, 40)
    _link(conn, rng, units, units)
    where = Where(sql="AND true")  # a filter, checked here against the sets below
    with pool.tenant_connection(TENANT, autocommit=True) as read:
        held = read_whole(read, agent_id)
        for kept in (frozenset(units[::3]), frozenset(units[: len(units) // 2])):
            for fanout in (1, 2, 4, 8):
                for matching in (Matching(complete=kept), Matching(failing=UnitSet.of(kept))):
                    assert graph.neighbours(
                        read, units, fanout=fanout, where=where, matching=matching,
                        read=held.links, read_ahead=False,
                    ) == graph.neighbours(
                        read, units, fanout=fanout, where=where, matching=matching
                    ), (fanout, matching.complete is None)  # fmt: skip


def test_a_failed_read_is_not_tried_again_on_every_search(
    pool: Any, agent_conn: Any, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memora.retrieval.caches import agent_links

    conn, rng = agent_conn, np.random.default_rng(5)
    units = add_turns(conn, agent_id, rng, 10)
    _link(conn, rng, units, units)
    reads: list[str] = []

    def failing(_conn: Any, agent_key: str) -> AgentLinks:
        reads.append(agent_key)
        raise RuntimeError("the read failed")

    monkeypatch.setattr(agent_links, "read_whole", failing)
    held = HeldLinks(pool, 64 << 20, 600)
    try:
        with pool.tenant_connection(TENANT, autocommit=True) as read:
            for _ in range(3):
                assert held.current(read, TENANT, agent_id) is None
                wait_until(lambda: not held.reading, timeout=30, interval=0.05)
        assert reads == [agent_id]  # once, then the searches read PostgreSQL until the TTL
    finally:
        held.close()
