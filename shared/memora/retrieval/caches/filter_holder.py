"""What the query service holds per filter and reads whole in the background (issue 29): the units
failing a broad filter (`caches.failing_units`) and the keyword index of those passing a
narrow one (`caches.filter_terms`). Both are read whole from a filter's second search
within the TTL, on the background thread of `ReadCaches` (`read_later`), and brought up to
date by each search that uses them; this is their bookkeeping."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

from cachetools import TTLCache
from prometheus_client import Counter
from psycopg import Connection
from psycopg.rows import tuple_row
from psycopg.types.numeric import Int8

from memora.retrieval.types import SearchScope

# Whether the agent's searchable units had a row written, or one removed, at or after `since`
# (an xid: `memory_vectors.written`, `vector_removals.removed`). Each the first in its index's
# order, so that the generic plan it is kept with reads that range (an EXISTS's dropped its
# ORDER BY and scanned every row); planned once, it costs less than the read of the changes,
# planned for its filter each time (docs/retrieval.md, "What the query service holds").
_WRITTEN_SINCE = """
    SELECT (SELECT m.written FROM memory_vectors m
            WHERE m.agent_id = %(agent)s AND m.written >= %(since)s
            ORDER BY m.written LIMIT 1) IS NOT NULL
        OR (SELECT r.removed FROM vector_removals r
            WHERE r.agent_id = %(agent)s AND r.removed >= %(since)s
            ORDER BY r.removed LIMIT 1) IS NOT NULL
"""


def written_since(conn: Connection[Any], agent_key: str, since: int) -> bool:
    """Whether anything a held filter's entry read as of `since` (its snapshot's xmin) could
    have missed is visible to `conn` now: a row of the agent's `memory_vectors` written, or one
    removed, by a transaction whose xid is at least `since`. When not, the entry stands as it
    is, `since` and all (a transaction in progress now is at least that, read once it commits)."""
    params = {"agent": agent_key, "since": Int8(since)}
    cursor = conn.cursor(row_factory=tuple_row)
    row = cursor.execute(_WRITTEN_SINCE, params, prepare=True).fetchone()
    assert row is not None
    return bool(row[0])


class Entry(Protocol):
    @property
    def count(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def whole_at(self) -> float: ...
    @property
    def horizon(self) -> int: ...


E = TypeVar("E", bound=Entry)


class FilterHolder(ABC, Generic[E]):
    """Entries per filter (`key`), at most `max_bytes` in all (the least recently used go first),
    each dropped `ttl` seconds after its whole read; a filter whose entry would count more than
    `at_most` units is not held. `reads` counts the whole reads and the reads of changes, as
    does the metric given."""

    def __init__(
        self, max_bytes: int, ttl: float, *, at_most: int, reads: Counter,
        filters_noted: int = 10_000, clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._clock = clock  # what `ttl` is counted on (tests give their own)
        self.at_most = at_most
        self._counter = reads  # the metric of the whole reads and the reads of changes
        self._ttl = ttl  # the cache's own expiry restarts with each refresh: not a whole read
        self._entries: TTLCache[tuple[Any, ...], E] = TTLCache(
            max(max_bytes, 1), ttl, timer=clock, getsizeof=lambda e: max(e.nbytes, 1)
        )
        # the filters searched lately and not held: True, to be read on their next search;
        # False, more units counted than `at_most`
        self._noted: TTLCache[tuple[Any, ...], bool] = TTLCache(filters_noted, ttl, timer=clock)
        self._reading: set[tuple[Any, ...]] = set()
        self._lock = threading.Lock()
        self.reads = {"whole": 0, "changes": 0}

    def footprint(self) -> tuple[int, int]:
        """Entries held and their bytes."""
        with self._lock:
            return len(self._entries), int(self._entries.currsize)

    @abstractmethod
    def key(self, scope: SearchScope) -> tuple[Any, ...]:
        """What an entry is held for."""

    @abstractmethod
    def _whole(self, conn: Connection[Any], scope: SearchScope) -> E | None:
        """The scope's entry, read whole in `conn`'s snapshot (None: it counts more than
        `at_most`, found without reading it all)."""

    @abstractmethod
    def _changes(self, conn: Connection[Any], scope: SearchScope, held: E) -> E | None:
        """`held` brought up to date with what was written since its last read (None: it
        cannot be, read it whole again)."""

    def refreshed(self, conn: Connection[Any], scope: SearchScope) -> E | None:
        """The scope's entry as it stands in `conn`'s snapshot, or None when none is held (or
        no longer: it could not be brought up to date, or counts more than `at_most`)."""
        key = self.key(scope)
        held = self.held(key)
        if held is None:
            return None
        # nothing written since its last read: as it is (one plain statement instead of its
        # filter's, which is planned for the filter's values each time)
        fresh = written_since(conn, scope.agent_key, held.horizon)
        found = self._changes(conn, scope, held) if fresh else held
        self._counter.labels("changes").inc()
        return self.settle(key, held, found, "changes")

    def load(self, conn: Connection[Any], scope: SearchScope) -> None:
        """Reads the scope's entry whole and holds it (after `wanted`)."""
        key = self.key(scope)
        with self.reading(key):
            entry = self._whole(conn, scope)
            self._counter.labels("whole").inc()
            self.settle(key, None, entry, "whole", again=False)

    def now(self) -> float:
        return self._clock()

    def held(self, key: tuple[Any, ...]) -> E | None:
        """The entry held for `key`, unless none is or it was read whole more than `ttl` ago
        (then dropped, to be read whole again from the next search: `wanted`)."""
        with self._lock:
            held = self._entries.get(key)
            if held is not None and self.now() - held.whole_at > self._ttl:
                del self._entries[key]
                self._noted[key] = True
                held = None
        return held

    def count(self, scope: SearchScope) -> int | None:
        """How many units the scope's entry counted when last read (None: not held)."""
        with self._lock:
            held = self._entries.get(self.key(scope))
        return None if held is None else held.count

    def wanted(self, scope: SearchScope) -> bool:
        """Whether to read the scope's filter whole now (then `load` it): not held, not being
        read, searched before within the TTL and not found too broad; notes this search."""
        key = self.key(scope)
        with self._lock:
            if key in self._entries or key in self._reading:
                return False
            before = self._noted.get(key)
            if before is None:
                self._noted[key] = True
            if before is not True:
                return False
            self._reading.add(key)
            return True

    @contextmanager
    def reading(self, key: tuple[Any, ...]) -> Iterator[None]:
        """Around a whole read that `wanted` let start."""
        try:
            yield
        finally:
            with self._lock:
                self._reading.discard(key)

    def settle(
        self, key: tuple[Any, ...], held: E | None, found: E | None, read: str, *,
        again: bool = True,
    ) -> E | None:  # fmt: skip
        """Holds `found`, read from `held` (None: read whole) as `read` says, in its place unless
        another read replaced `held` meanwhile. `found` None drops the entry: to be read whole
        again (`again`: it could not be brought up to date) or not (it counts too many), as
        counting more than `at_most` units does. Returns what the search may use."""
        with self._lock:
            self.reads[read] += 1
            if found is None or found.count > self.at_most:
                self._noted[key] = found is None and again
                self._entries.pop(key, None)
                return None
            if held is None or self._entries.get(key) is held:
                try:
                    self._entries[key] = found
                except ValueError:  # larger than the whole cache: used, not kept
                    self._entries.pop(key, None)
        return found
