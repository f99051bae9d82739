"""Where a read goes: a streaming replica when there is one and it keeps up, else the primary;
and reads that wait for a write (read-your-writes).

The query service's read routes (search, recall, conversation search) read from the replica of
`MEMORA_READ_DATABASE_URL`; writes stay on the primary. The replica's state (reachable, its lag)
is checked by a thread every `CHECK_INTERVAL`: a replica that does not answer, or lags more than
`MEMORA_READ_MAX_LAG_SECONDS`, sends reads to the primary until it is back (`ReadChoice.reason`
says why; the query service puts it in a header and a metric).

A read may name an operation (`after_operation`): it then sees what that operation made
searchable. The primary says whether the operation has finished and, in the same statement,
its WAL insert position, which is past the operation's commit once it has finished; the read
goes to the replica once the replica has replayed that position (waiting up to
`MEMORA_READ_AFTER_WAIT_MS`), else to the primary. An operation still running is waited for up
to `MEMORA_READ_AFTER_TIMEOUT_SECONDS`, after which the read is answered anyway and says so
(`pending`). Without `after_operation` nothing waits.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

import psycopg
from psycopg import Connection
from psycopg.rows import dict_row

from memora.basics.errors import NotFound
from memora.basics.stages import OperationStatus
from memora.db.pool import Pool

log = logging.getLogger(__name__)

CHECK_INTERVAL = 0.5  # seconds between two checks of the replica's state
POLL = 0.02  # seconds between two looks at an operation or the replica's replay position

# The replica's lag: 0 while it has replayed all it received (an idle primary sends nothing,
# so the time since the last replayed commit would only grow), else the age of that commit.
_REPLICA_STATE = """
SELECT pg_is_in_recovery() AS standby,
       CASE WHEN pg_last_wal_receive_lsn() IS NULL
                 OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0)
       END::float8 AS lag
"""
# The insert position, not the written one: with asynchronous commit (the embedded server's)
# an operation's commit record may still wait in the WAL buffers when the read asks.
_OPERATION = "SELECT status, pg_current_wal_insert_lsn()::text AS lsn FROM operations WHERE id = %s"
_REPLAYED = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false) AS replayed"

Source = Literal["primary", "replica"]


@dataclass(frozen=True)
class ReadChoice:
    """Where one read goes, and why: `replica`; or to the primary for `no_replica`,
    `replica_down`, `replica_lagging`, `not_replayed` (the replica had not replayed the named
    operation within the wait); the query service adds `replica_failed` (a read on the replica
    failed and was read again on the primary). `waited`: seconds spent waiting; `pending`: the named
    operation had not finished when the wait ended."""

    pool: Pool
    source: Source
    reason: str
    waited: float = 0.0
    pending: bool = False


@dataclass(frozen=True)
class ReplicaState:
    reachable: bool
    lag: float | None  # seconds; None when not reachable


class ReadRouting:
    def __init__(
        self,
        primary: Pool,
        replica: Pool | None = None,
        *,
        max_lag: float = 10.0,
        replay_wait: float = 2.0,
        operation_timeout: float = 10.0,
    ) -> None:
        self.primary, self.replica = primary, replica
        self.max_lag, self.replay_wait, self.operation_timeout = (
            max_lag,
            replay_wait,
            operation_timeout,
        )
        self._state = ReplicaState(False, None)
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        if replica is not None:  # checked off the requests' path: a down replica costs none
            self._state, conn = self._check(None)
            self._watcher = threading.Thread(
                target=self._watch, args=(conn,), name="memora-replica-check", daemon=True
            )
            self._watcher.start()

    def state(self) -> ReplicaState:
        """The replica's state as last checked (every `CHECK_INTERVAL`)."""
        return self._state

    def mark_down(self) -> None:
        """A read on the replica failed: the primary serves until the next check finds it."""
        self._state = ReplicaState(False, None)

    def close(self) -> None:
        self._closed.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)

    def _watch(self, conn: Connection[Any] | None) -> None:
        while not self._closed.wait(CHECK_INTERVAL):
            try:
                self._state, conn = self._check(conn)
            except Exception:  # never let the watcher die: its state would stay as it was
                log.exception("read replica check failed")
                if conn is not None:
                    conn.close()
                self._state, conn = ReplicaState(False, None), None
        if conn is not None:
            conn.close()

    def _check(self, conn: Connection[Any] | None) -> tuple[ReplicaState, Connection[Any] | None]:
        """The replica's state, on a connection of the check's own (not the pool's, which
        retries a refused connection until its timeout); the connection, None if it broke."""
        assert self.replica is not None
        try:
            if conn is None or conn.closed:
                info = self.replica.conninfo
                url = info() if callable(info) else info
                conn = psycopg.connect(
                    url, autocommit=True, connect_timeout=2, row_factory=dict_row
                )
            row = _one(conn, _REPLICA_STATE)
        except psycopg.Error as exc:  # down or restarting
            if self._state.reachable:
                log.warning("read replica not reachable, reads go to the primary: %s", exc)
            if conn is not None:
                conn.close()
            return ReplicaState(False, None), None
        assert row is not None
        if not row["standby"]:  # promoted: it is a primary of its own now, not our replica
            log.warning("read replica is not in recovery: reads go to the primary")
            return ReplicaState(False, None), conn
        return ReplicaState(True, float(row["lag"])), conn

    def choose(self, tenant_id: str, after_operation: UUID | None = None) -> ReadChoice:
        """Where a read of `tenant_id` goes; with `after_operation`, one that sees what that
        operation (of the same tenant: else NotFound) made searchable."""
        started = time.monotonic()
        target, pending = (
            self._finished(tenant_id, after_operation) if after_operation else (None, False)
        )
        reason = self._primary_because(target)
        pool = self.primary if reason or self.replica is None else self.replica
        source: Source = "primary" if reason else "replica"
        return ReadChoice(pool, source, reason or "replica", time.monotonic() - started, pending)

    def _primary_because(self, target: str | None) -> str | None:
        """Why the read cannot go to the replica (None: it can)."""
        if self.replica is None:
            return "no_replica"
        state = self.state()
        if not state.reachable:
            return "replica_down"
        if state.lag is not None and state.lag > self.max_lag:
            return "replica_lagging"
        if target is not None and not self._replayed(target):
            return "not_replayed"
        return None

    def _finished(self, tenant_id: str, operation_id: UUID) -> tuple[str | None, bool]:
        """The primary's WAL position once the operation has finished (None: it had not within
        the timeout) and whether it is still pending."""
        deadline = time.monotonic() + self.operation_timeout
        while True:
            with self.primary.tenant_connection(tenant_id, autocommit=True) as conn:
                row = _one(conn, _OPERATION, (operation_id,))
            if row is None:
                raise NotFound(
                    "operation_not_found",
                    f"operation {operation_id} not found",
                    {"after_operation": str(operation_id)},
                )
            if OperationStatus(row["status"]).terminal:
                return row["lsn"], False
            if time.monotonic() >= deadline:
                return None, True
            time.sleep(POLL)

    def _replayed(self, lsn: str) -> bool:
        """Whether the replica replays `lsn` within the wait."""
        assert self.replica is not None
        deadline = time.monotonic() + self.replay_wait
        try:
            with self.replica.connection(timeout=1.0) as conn:
                conn.autocommit = True
                try:
                    while True:
                        row = _one(conn, _REPLAYED, (lsn,))
                        if row is not None and row["replayed"]:
                            return True
                        if time.monotonic() >= deadline:
                            return False
                        time.sleep(POLL)
                finally:
                    conn.autocommit = False
        except Exception as exc:  # the replica went away meanwhile: the primary answers
            log.warning("read replica not reachable: %s", exc)
            return False


def _one(conn: Connection[Any], sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(sql, params).fetchone()
    return row
