"""Re-enqueue operations that stopped moving (a lost message, a worker that died)."""

from __future__ import annotations

import logging
from typing import Any

from psycopg_pool import ConnectionPool

from memora.pipeline.backend import TaskBackend
from memora.pipeline.stages import Stage
from memora.store import operations

log = logging.getLogger("memora.reconcile")


def reconcile(
    pool: ConnectionPool,
    backend: TaskBackend,
    older_than_seconds: float,
    backfill_older_than_seconds: float | None = None,
) -> list[dict[str, Any]]:
    """Every stage is idempotent, so re-enqueueing a live operation only costs a no-op task.
    Each goes back to the queues of its priority (backfill work never lands on live queues)."""
    with pool.connection() as conn:
        stuck = operations.claim_stuck(conn, older_than_seconds, backfill_older_than_seconds)
    for op in stuck:
        stage = Stage(op["stage"]) if op["stage"] else None
        if stage is not None:
            log.warning("re-enqueueing stuck operation %s at stage %s", op["id"], stage.value)
            backend.enqueue(stage, op["id"], backfill=op["backfill"])
    return stuck
