"""The units passing a filter held in the query service (`caches.passing_units`, migration
0024) on real PostgreSQL: they rank a filter as the exact scan does, and every read brings
them up to date with what was written since, whatever changed."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from psycopg.types.json import Jsonb

from memora.retrieval.arms import exact
from memora.retrieval.caches.passing_units import PassingUnits
from memora.retrieval.filters import Filters, Matching, compile_filters
from memora.retrieval.types import SearchScope
from memora.store import vector_removals
from tests.integration.memory_support import store_memory, unit_vector

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 1, tzinfo=UTC)
DIM = 384
EVEN = {"scene": "even"}


@pytest.fixture()
def conn(agent_conn: Any) -> Any:
    return agent_conn


def _memory(conn: Any, agent_id: str, vector: np.ndarray, day: int) -> uuid.UUID:
    metadata = {"scene": "odd" if day % 2 else "even", "turn": day}
    return store_memory(
        conn, agent_id, vector, START + timedelta(days=day), metadata, f"memory {day}"
    )


def _scope(agent_id: str, filters: dict[str, Any]) -> SearchScope:
    where = compile_filters(Filters.model_validate(filters), "m")
    return SearchScope("default", agent_id, ("world",), where)


def test_held_units_rank_a_filter_as_the_exact_scan_does(conn: Any, agent_id: str) -> None:
    """The same units, order (ties by id) and similarities as `exact_scan`, for equality,
    range and time filters, read whole and then from memory; more than `at_most`: None."""
    rng = np.random.default_rng(5)
    query = unit_vector(rng.standard_normal(DIM))
    for day in range(80):
        _memory(
            conn, agent_id, unit_vector(rng.standard_normal(DIM) + (day % 4) * 0.3 * query), day
        )
    twin = unit_vector(rng.standard_normal(DIM))  # two units alike: a tie broken by id
    _memory(conn, agent_id, twin, 100)
    _memory(conn, agent_id, twin, 102)
    conn.commit()
    held = PassingUnits(1 << 24, 600.0)
    time = {"time": {"start": "2024-01-10T00:00:00Z", "end": "2024-02-10T00:00:00Z"}}
    for filters in (EVEN, {"turn": {"gte": 10, "lt": 50}}, time, EVEN):
        scope = _scope(agent_id, filters)
        for vector in (query, twin):
            with conn.transaction():
                scanned = exact.exact_scan(conn, scope, vector=vector, limit=10, at_most=100)
                kept = exact.held_scan(held, conn, scope, vector=vector, limit=10, at_most=100)
            assert scanned is not None and kept is not None
            assert [u for u, _ in kept.ranked] == [u for u, _ in scanned.ranked], filters
            assert np.allclose(
                [s for _, s in kept.ranked], [s for _, s in scanned.ranked], atol=1e-5
            )
            assert kept.count == scanned.count and kept.members == set(scanned.ids.split(","))
            assert set(kept.ids.split(",")) == kept.members
        with conn.transaction():
            assert exact.held_scan(held, conn, scope, vector=query, limit=5, at_most=8) is None


def test_held_units_follow_every_change(conn: Any, pool: Any, agent_id: str) -> None:
    """Every read gives what the exact scan gives: after a unit added (also by a transaction
    still open at the last read, committed after it), re-embedded, forgotten, deleted, moved
    out of the filter or into it, and after the agent's purge. Additions and re-embeddings
    are read as what changed; a removal makes the next read a whole one."""
    rng = np.random.default_rng(7)
    query = unit_vector(rng.standard_normal(DIM))
    units = [
        _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), 2 * d) for d in range(20)
    ]
    conn.commit()
    held = PassingUnits(1 << 24, 600.0)
    scope = _scope(agent_id, EVEN)

    def removals() -> int:
        row = conn.execute(
            "SELECT count(*) AS n FROM vector_removals WHERE agent_id = %s", (agent_id,)
        ).fetchone()
        return int(row["n"])

    def agrees() -> list[uuid.UUID]:
        with conn.transaction():
            scanned = exact.exact_scan(conn, scope, vector=query, limit=5, at_most=1000)
            kept = exact.held_scan(held, conn, scope, vector=query, limit=5, at_most=1000)
        assert scanned is not None and kept is not None
        assert [u for u, _ in kept.ranked] == [u for u, _ in scanned.ranked]
        assert np.allclose([s for _, s in kept.ranked], [s for _, s in scanned.ranked], atol=1e-5)
        assert kept.members == set(filter(None, scanned.ids.split(",")))
        assert kept.count == scanned.count
        return [u for u, _ in kept.ranked]

    first = agrees()
    assert len(first) == 5
    with pool.connection() as other:  # committed after a read that began meanwhile
        near = _memory(other, agent_id, unit_vector(query + 0.05 * rng.standard_normal(DIM)), 60)
        assert near not in agrees()
        other.commit()
    assert agrees()[0] == near
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (query, units[7]))
    conn.commit()
    assert agrees()[0] == units[7]
    assert removals() == 0  # additions and re-embeddings: read as what changed
    assert held.reads == {"whole": 1, "changes": 3}
    conn.execute("UPDATE memory_units SET status = 'forgotten' WHERE id = %s", (units[7],))
    conn.commit()
    assert units[7] not in agrees()
    assert removals() == 1
    conn.execute("DELETE FROM memory_units WHERE id = %s", (near,))
    conn.commit()
    assert near not in agrees()
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (query, units[3]))
    conn.commit()
    assert agrees()[0] == units[3]
    conn.execute(
        "UPDATE memory_units SET metadata = %s WHERE id = %s", (Jsonb({"scene": "odd"}), units[3])
    )
    conn.commit()  # out of the filter
    assert units[3] not in agrees()
    odd = _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), 31)
    conn.execute("UPDATE memory_units SET embedding = %s WHERE id = %s", (query, odd))
    conn.commit()
    assert odd not in agrees()
    conn.execute(
        "UPDATE memory_units SET metadata = %s WHERE id = %s", (Jsonb({"scene": "even"}), odd)
    )
    conn.commit()  # into it
    assert agrees()[0] == odd
    assert removals() == 4  # each removal or move: the next read is a whole one
    assert held.reads == {"whole": 5, "changes": 9}
    with conn.transaction():
        assert vector_removals.compact(conn, agent_id) == 3
    assert removals() == 1
    (kept,) = conn.execute(  # it no longer names the units of the rows dropped (0027)
        "SELECT units FROM vector_removals WHERE agent_id = %s", (agent_id,)
    ).fetchall()
    assert kept["units"] is None
    from memora.store.purge import purge_agents

    with conn.transaction():
        purge_agents(conn, [agent_id])
    assert agrees() == []  # the purge's own removal stays: what was held is gone
    assert removals() == 1


def test_held_units_rank_exactly_up_to_the_cap(
    conn: Any, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `exact_max`, a filter the estimates put above the walk's break-even is walked when
    the database would rank it, and ranked exactly when the query service holds its units;
    once it does, their count stands for the planner's estimate."""
    rng = np.random.default_rng(9)
    for day in range(40):
        _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), day)
    conn.commit()
    scope = _scope(agent_id, EVEN)
    monkeypatch.setattr(  # the planner's guesses: 30 pass the filter, of the agent's 40
        exact, "_estimate", lambda _c, _s, where: 30.0 if where.sql else 40.0
    )
    passing = PassingUnits(1 << 24, 600.0)
    with conn.transaction():  # 30² > 12 · 1 · 40
        assert exact.plan_scan(conn, scope, limit=1, exact_max=3) == 0
        assert exact.plan_scan(conn, scope, limit=1, exact_max=3, passing=passing) == (
            exact.EXACT_SCAN_CAP
        )
        assert passing.read(conn, scope, exact.EXACT_SCAN_CAP) is not None
    matching = Matching()  # once held, their true count (20) stands for the estimate
    with conn.transaction():
        assert exact.plan_scan(conn, scope, limit=1, exact_max=25, passing=passing) == 25
        exact.plan_scan(conn, scope, limit=1, exact_max=3, passing=passing, matching=matching)
    assert matching.share == 0.5


def test_a_filter_is_held_from_its_second_search(conn: Any, agent_id: str) -> None:
    """`recurs`: a filter's first search is not held (its units would be read whole for one
    search), its second is; one more units pass than may be ranked exactly is not held."""
    rng = np.random.default_rng(13)
    for day in range(12):
        _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), day)
    conn.commit()
    passing = PassingUnits(1 << 24, 600.0)
    even, turns = _scope(agent_id, EVEN), _scope(agent_id, {"turn": {"lt": 10}})
    assert [passing.recurs(even), passing.recurs(even), passing.recurs(turns)] == [
        False, True, False
    ]  # fmt: skip
    with conn.transaction():
        assert passing.read(conn, even, 100) is not None
        assert passing.read(conn, turns, 5) is None  # 10 pass
    assert passing.count(even) == 6 and passing.count(turns) is None
    assert passing.recurs(even) and not passing.recurs(turns)
    with conn.transaction():  # held, then more pass than may be ranked: no longer held
        assert passing.read(conn, even, 5) is None
    assert passing.count(even) is None and not passing.recurs(even)


def test_a_filter_in_use_is_read_whole_again_after_the_ttl(conn: Any, agent_id: str) -> None:
    """Each search's read of what changed refreshes an entry, which must not postpone its
    whole read: a filter searched again and again is read whole once the TTL has passed
    since its last whole read."""
    rng = np.random.default_rng(17)
    for day in range(6):
        _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), day)
    conn.commit()
    clock = [0.0]
    passing = PassingUnits(1 << 24, ttl=0.6, clock=lambda: clock[0])
    scope = _scope(agent_id, EVEN)
    with conn.transaction():
        passing.read(conn, scope, 100)
    for _ in range(3):  # 0.9 s in all, each read within the cache's own expiry of the last
        clock[0] += 0.3
        with conn.transaction():
            assert passing.read(conn, scope, 100) is not None
    assert passing.reads == {"whole": 2, "changes": 2}


def test_held_units_with_nothing_written_since_stand_as_read(conn: Any, agent_id: str) -> None:
    """A read with none of the agent's units written or removed since the last one
    (`caches.filter_holder.written_since`) gives the held units as they are, horizon and all;
    one written since is read as what changed."""
    rng = np.random.default_rng(37)
    for day in range(8):
        _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), day)
    conn.commit()
    passing = PassingUnits(1 << 24, 600.0)
    scope = _scope(agent_id, EVEN)
    with conn.transaction():
        first = passing.read(conn, scope, 100)
    with conn.transaction():
        again = passing.read(conn, scope, 100)
    assert first is not None and again is first
    _memory(conn, agent_id, unit_vector(rng.standard_normal(DIM)), 20)  # even: passes
    conn.commit()
    with conn.transaction():
        after = passing.read(conn, scope, 100)
    assert after is not None and after.count == first.count + 1
    assert after.horizon > first.horizon
    assert passing.reads == {"whole": 1, "changes": 2}
