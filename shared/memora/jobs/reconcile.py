"""reconcile: re-enqueue operations that stopped moving (a lost message, a worker that died)."""

from __future__ import annotations

import logging
from typing import Any

import redis
from psycopg_pool import ConnectionPool

from memora.basics.stages import INGEST_STAGES, queue_for
from memora.jobs.base import JobContext, JobResult
from memora.pipeline.handoff import TaskBackend
from memora.pipeline.monitoring import queue_depths
from memora.store import operations
from memora.store.operations import StuckOperation

log = logging.getLogger("memora.reconcile")


def reconcile(
    pool: ConnectionPool[Any],
    backend: TaskBackend,
    older_than_seconds: float,
    backfill_older_than_seconds: float | None = None,
) -> list[StuckOperation]:
    """Every stage is idempotent, so re-enqueueing a live operation only costs a no-op task.
    Enqueued directly, not through `hand_off`: this is where handed-off work lands when the
    broker was down, so a failure here fails the run, which the next one repeats.
    Each goes back to the queues of its priority (backfill work never lands on live queues)."""
    with pool.connection() as conn:
        stuck = operations.claim_stuck(conn, older_than_seconds, backfill_older_than_seconds)
    for op in stuck:
        if op.stage is not None:
            log.warning(
                "re-enqueueing stuck operation",
                extra={"operation": str(op.id), "stage": op.stage.value},
            )
            backend.enqueue(op.stage, op.id, backfill=op.backfill)
    return stuck


def backfill_backlog(broker_url: str) -> int:
    """Messages waiting on the backfill queues (0 when the broker cannot say)."""
    try:
        with redis.Redis.from_url(broker_url, socket_timeout=2) as client:
            depths = queue_depths(client, [queue_for(s, backfill=True) for s in INGEST_STAGES])
    except redis.RedisError:
        log.warning("backfill queue depth unknown; the live threshold applies", exc_info=True)
        return 0
    return sum(depths.values())


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    # Backfill work waits behind its own backlog by design, so it gets the longer threshold
    # while the backfill queues hold messages; with them empty, a quiet operation was lost.
    backlog = backfill_backlog(s.broker)
    stuck = reconcile(
        ctx.pool,
        ctx.backend,
        s.stuck_after_seconds,
        s.backfill_stuck_after_seconds if backlog else s.stuck_after_seconds,
    )
    return JobResult(examined=len(stuck), changed=len(stuck), details={"backfill_backlog": backlog})
