"""Re-run a failed operation from the stage that failed (`POST /api/operations/{id}/retry`,
`memora ops retry`). Stages before it stay done; every stage is idempotent, so a retry that
races a duplicate delivery writes nothing twice."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.pipeline.backend import TaskBackend
from memora.queues import Stage
from memora.store import operations
from memora.tenancy import Scope

log = logging.getLogger("memora.retry")

Outcome = operations.ReopenOutcome


def retry_operation(
    conn: Connection[Any], backend: TaskBackend, scope: Scope | None, operation_id: UUID
) -> Outcome:
    """Reopen a failed operation and enqueue its failed stage. A second call while the retry
    is queued or running does nothing ("active"); a completed or superseded operation is
    "finished"; `scope` None reaches every tenant (operators)."""
    with conn.transaction():
        outcome, row = operations.reopen_failed(conn, scope, operation_id)
    if outcome == "reopened" and row is not None:
        backfill = (row["payload"] or {}).get("priority") == "backfill"
        try:
            backend.enqueue(Stage(row["stage"]), operation_id, backfill=backfill)
        except Exception:  # queued and durable: the reconciler re-enqueues it
            log.warning("broker unavailable; retry of %s left to the reconciler", operation_id,
                        exc_info=True)  # fmt: skip
    return outcome
