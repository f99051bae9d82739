"""Operations as their owners and operators act on them: read one, list them, retry a failed
one from the stage that failed (`POST /api/operations/{id}/retry`, `memora ops retry`).

A retry leaves the stages before the failed one done; every stage is idempotent, so a retry
that races a duplicate delivery writes nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Conflict, NotFound
from memora.basics.stages import OperationStatus
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.pipeline.handoff import hand_off
from memora.store import operations
from memora.store.operations import Operation, ReopenOutcome

Retried = Literal["reopened", "active"]


def retry_operation(
    app: AppContext, conn: Connection[Any], scope: Scope | None, operation_id: UUID
) -> ReopenOutcome:
    """Reopen a failed operation and hand its failed stage to the pipeline. A second call while
    the retry is queued or running does nothing ("active"); a completed or superseded
    operation is "finished"; `scope` None reaches every tenant (operators)."""
    with conn.transaction():
        outcome, op = operations.reopen_failed(conn, scope, operation_id)
    if outcome == "reopened" and op is not None and op.stage is not None:
        hand_off(app.backend, op.stage, operation_id, backfill=op.backfill)
    return outcome


def retry(
    app: AppContext, conn: Connection[Any], scope: Scope, operation_id: UUID
) -> tuple[Retried, Operation]:
    """The tenant's retry: `retry_operation`, then the operation as it now stands. NotFound
    for an operation outside the tenant, Conflict for one with nothing to retry."""
    outcome = retry_operation(app, conn, scope, operation_id)
    op = operations.find_operation(conn, scope, operation_id)
    if outcome == "not_found" or op is None:
        raise NotFound("not_found", f"operation {operation_id} not found")
    if outcome == "finished":
        raise Conflict("not_failed", f"operation {operation_id} is {op.status}: nothing to retry")
    return outcome, op


def get(app: AppContext, conn: Connection[Any], scope: Scope, operation_id: UUID) -> Operation:
    """Only operations of the tenant's agents; any other id is NotFound."""
    op = operations.find_operation(conn, scope, operation_id)
    if op is None:
        raise NotFound("not_found", f"operation {operation_id} not found")
    return op


@dataclass(frozen=True)
class OperationPage:
    operations: list[Operation]
    next_position: tuple[datetime, UUID] | None  # keyset of the last one, when more follow


def list_page(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope | None,
    *,
    agent_id: str | None = None,
    status: OperationStatus | None = None,
    limit: int = 50,
    before: tuple[datetime, UUID] | None = None,
) -> OperationPage:
    """Operations newest first, after the keyset `before`; `scope` None: every tenant's."""
    rows = operations.list_operations(
        conn, scope, agent_id=agent_id, status=status, limit=limit + 1, before=before
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return OperationPage(rows, (rows[-1].created_at, rows[-1].id) if more else None)
