"""The frequency signal: access counts of returned memories, written off the request path.

A search only adds its hits to an in-memory counter; a background thread writes the sums to
`memory_access` every `interval` seconds in one statement (and once more on close). A process
that dies loses at most one interval of counts, a soft signal for the heuristic reranker.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg_pool import ConnectionPool

from memora.basics.models import utcnow

log = logging.getLogger("memora.retrieval.access")


class AccessRecorder:
    def __init__(self, pool: ConnectionPool, interval: float = 1.0) -> None:
        self.pool, self.interval = pool, interval
        self._pending: Counter[UUID] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, ids: Iterable[UUID]) -> None:
        with self._lock:
            self._pending.update(ids)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="memora-access-counts", daemon=True
                )
                self._thread.start()

    def flush(self) -> int:
        """Write what is pending now; returns the number of units updated."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
        if not pending:
            return 0
        try:
            with self.pool.connection() as conn:
                return record_access(conn, pending, utcnow())
        except Exception as exc:  # counted again next time; never fails a search
            log.warning("access counts not written, will retry: %s", exc)
            with self._lock:
                self._pending.update(pending)
            return 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()


def record_access(conn: Connection[Any], counts: Mapping[UUID, int], at: datetime) -> int:
    """Add to the access counts of these units (units deleted meanwhile are skipped)."""
    ids = sorted(counts, key=str)  # one lock order for every writer
    cur = conn.execute(
        """
        INSERT INTO memory_access (unit_id, access_count, last_accessed_at)
        SELECT u.id, u.n, %(at)s FROM unnest(%(ids)s::uuid[], %(n)s::int[]) AS u(id, n)
        JOIN memory_units m ON m.id = u.id ORDER BY u.id
        ON CONFLICT (unit_id) DO UPDATE
        SET access_count = memory_access.access_count + EXCLUDED.access_count,
            last_accessed_at = EXCLUDED.last_accessed_at
        """,
        {"ids": ids, "n": [counts[i] for i in ids], "at": at},
    )
    return max(cur.rowcount, 0)
