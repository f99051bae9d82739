"""The few units failing a broad filter, kept in the query service's memory (issue 29).

A filter that most of an agent's units pass (an episodic type nearly all of them carry, a
language, "not archived") is walked with the filter in the HNSW scan, and the keyword
retriever, the graph and the entity retriever then check each unit they find against it by
key: a heap block a unit, which made such a search markedly slower than the unfiltered one
(docs/retrieval.md, "What the query service holds"). Knowing the units that fail, every such
check is a set lookup, and the keyword retriever can take the unfiltered best and drop those:
exact, where the check by key took as many of the best as the filter's estimated share should
need.

The failing units are the agent's searchable units (`memory_vectors`, every fact type, as the
checks by key read them) whose filter conditions are false or unknown. Their first read scans
the agent's rows, which takes longer than a search, so it runs in the background, from a
filter's second search within the TTL (`wanted`); until it is in, searches check by key as
before. Entries stay exact as the units passing a narrower filter do (`caches.passing_units`):
each search first reads the agent's rows written at or after the snapshot xmin of the entry's
last read (`memory_vectors.written`, migration 0024) with their verdicts, one index range. A
removed row needs no whole read here: a unit no longer searchable is not returned whatever it
is taken to be, and a row whose filter columns changed is an update, read as written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from memora.basics import metrics
from memora.retrieval.caches.filter_holder import FilterHolder
from memora.retrieval.filters import UnitSet
from memora.retrieval.types import SearchScope

FAILING_CAP = 20_000  # a broad filter more units fail is checked by key, as before


@dataclass(frozen=True)
class Failing:
    """The units failing a filter, the xmin of the snapshot they were last read in, and when
    (`time.monotonic`) they were last read whole."""

    members: UnitSet
    horizon: int
    whole_at: float  # when it was read whole, on its holder's clock

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def nbytes(self) -> int:
        return 200 * len(self.members) + 100  # an id: its str, its int and their set entries

    def merged(self, failing: list[str], passing: list[str], horizon: int) -> Failing:
        """With the units written since: those that fail added, those that pass taken out."""
        return Failing(self.members.changed(failing, passing), horizon, self.whole_at)


class FailingUnits(FilterHolder[Failing]):
    """The units failing the broad filters searches use, per (tenant, agent, filter), at most
    `max_bytes` in all (the least recently used go first), each entry read whole again after
    `ttl` seconds; a filter more than `at_most` units fail is not held."""

    def __init__(
        self, max_bytes: int, ttl: float, *, at_most: int = FAILING_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        super().__init__(
            max_bytes, ttl, at_most=at_most, reads=metrics.FILTER_FAILING_READS, clock=clock
        )

    def key(self, scope: SearchScope) -> tuple[Any, ...]:
        return scope.filter_key

    def _whole(self, conn: Connection[Any], scope: SearchScope) -> Failing:
        horizon, failing, _ = _read(conn, scope, cap=self.at_most + 1)
        return Failing(UnitSet.of(failing), horizon, self.now())

    def _changes(self, conn: Connection[Any], scope: SearchScope, held: Failing) -> Failing:
        horizon, failing, passing = _read(conn, scope, since=held.horizon)
        return held.merged(failing, passing, horizon)


# The agent's rows failing the filter (every one, at most `cap`), or those written at or after
# `since` with their verdicts; and the xmin of the statement's snapshot. A condition that is
# unknown (NULL: a range on a key the unit lacks) fails, as in a WHERE clause.
_WHOLE = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 AS horizon,
           coalesce(string_agg(m.unit_id::text, ','), '') AS failing, '' AS passing
    FROM (SELECT m.unit_id FROM memory_vectors m
          WHERE m.agent_id = %(agent)s AND NOT coalesce(true {where}, false)
          LIMIT %(cap)s) AS m
"""
_CHANGES = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 AS horizon,
           coalesce(string_agg(m.unit_id::text, ',') FILTER (WHERE NOT m.passes), '') AS failing,
           coalesce(string_agg(m.unit_id::text, ',') FILTER (WHERE m.passes), '') AS passing
    FROM (SELECT m.unit_id, coalesce(true {where}, false) AS passes FROM memory_vectors m
          WHERE m.agent_id = %(agent)s AND m.written >= %(since)s) AS m
"""


def _read(
    conn: Connection[Any], scope: SearchScope, *, since: int | None = None, cap: int = 0
) -> tuple[int, list[str], list[str]]:
    """(the snapshot's xmin, failing ids, passing ids): every failing unit (at most `cap`;
    `since` None) or the units written at or after `since`."""
    where = scope.where
    statement = (_WHOLE if since is None else _CHANGES).format(where=where.sql)
    params = {"agent": scope.agent_key, "since": since, "cap": cap, **where.params}
    row = conn.execute(statement, params, prepare=where.prepare).fetchone()
    assert row is not None  # an aggregate: always one row
    failing, passing = row["failing"], row["passing"]
    return (
        int(row["horizon"]),
        failing.split(",") if failing else [],
        passing.split(",") if passing else [],
    )
