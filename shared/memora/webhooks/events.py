"""Webhook events and the outbox.

An event is recorded by inserting its deliveries in the transaction of what it reports, so a
rollback drops them and a commit keeps them. Their ids are remembered per connection; once the
caller has committed, `dispatch_committed(conn, backend)` hands them to the task backend the
caller was given (the use case's, the pipeline's): a Celery task each on the `webhooks` queue
(services.workers.dispatch). Deliveries whose hand-off was lost, or that were recorded with a
backend that sends none (inline), are picked up by the webhook worker's sweep
(memora.jobs.webhooks) within MEMORA_WEBHOOK_SWEEP_INTERVAL_SECONDS.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from psycopg import Connection

from memora.basics.tenancy import DEFAULT_TENANT, SEPARATOR, client_agent_id
from memora.store import webhooks as store
from memora.store.operations import Operation

log = logging.getLogger("memora.webhooks")

OPERATION_COMPLETED = "operation.completed"
OPERATION_FAILED = "operation.failed"
MEMORY_SUPERSEDED = "memory.superseded"
DOCUMENT_DELETED = "document.deleted"
DOCUMENT_TRASHED = "document.trashed"
DOCUMENT_RESTORED = "document.restored"
# The events an endpoint can subscribe to; `webhook.ping` goes only where it is asked for.
EVENT_TYPES = (
    OPERATION_COMPLETED, OPERATION_FAILED, MEMORY_SUPERSEDED, DOCUMENT_DELETED, DOCUMENT_TRASHED,
    DOCUMENT_RESTORED,
)  # fmt: skip
PING = "webhook.ping"

# Ids recorded on a connection whose transaction has not been dispatched yet.
_pending: weakref.WeakKeyDictionary[Connection[Any], list[UUID]] = weakref.WeakKeyDictionary()


@runtime_checkable
class WebhookSender(Protocol):
    """A task backend that also sends webhook deliveries (the Celery one); a backend without
    `deliver_webhooks` (inline) leaves them to the sweep."""

    def deliver_webhooks(self, delivery_ids: list[UUID]) -> None: ...


def dispatch(ids: list[UUID], backend: object) -> bool:
    """Hand committed deliveries to `backend`; False (logged when it failed) when it sends
    none or could not take them: they are durable and the sweep sends them."""
    if not ids or not isinstance(backend, WebhookSender):
        return False
    try:
        backend.deliver_webhooks(ids)
    except Exception:
        log.warning("webhook deliveries left to the sweep", extra={"n": len(ids)}, exc_info=True)
        return False
    return True


def dispatch_committed(conn: Connection[Any], backend: object) -> bool:
    """Call after committing the transaction that recorded events on `conn`, with the task
    backend the caller was given (`dispatch`)."""
    return dispatch(_pending.pop(conn, []), backend)


def tenant_of(agent_key: str) -> str:
    tenant, separator, _ = agent_key.rpartition(SEPARATOR)
    return tenant if separator else DEFAULT_TENANT


def emit(
    conn: Connection[Any],
    tenant_id: str,
    event_type: str,
    data: dict[str, Any],
    *,
    webhook_id: UUID | None = None,
) -> list[UUID]:
    """Record one event for the tenant's endpoints that take it, in the caller's transaction."""
    event_id = f"msg_{uuid.uuid4().hex}"
    payload = {"type": event_type, "timestamp": datetime.now(UTC).isoformat(), "data": data}
    ids = store.enqueue(conn, tenant_id, event_type, event_id, payload, webhook_id=webhook_id)
    if ids:
        _pending.setdefault(conn, []).extend(ids)
    return ids


def operation_finished(conn: Connection[Any], operation: Operation | None) -> None:
    """`operation.completed` or `operation.failed` for an operation that reached that status
    in the caller's transaction."""
    if operation is None:
        return
    event = {"completed": OPERATION_COMPLETED, "failed": OPERATION_FAILED}.get(operation.status)
    if event is None:
        return
    data = {
        "operation_id": str(operation.id),
        "agent_id": client_agent_id(operation.agent_id),
        "kind": str(operation.kind),
        "status": str(operation.status),
        "document_id": operation.document_id,
        "counts": operation.counts,
        "error": operation.error,
    }
    emit(conn, tenant_of(operation.agent_id), event, data)


def memory_superseded(
    conn: Connection[Any], agent_key: str, memory_ids: Iterable[UUID], by: UUID, reason: str
) -> None:
    """`memory.superseded` for each memory another (`by`) replaced in the caller's transaction."""
    for memory_id in memory_ids:
        data = {
            "agent_id": client_agent_id(agent_key),
            "memory_id": str(memory_id),
            "superseded_by": str(by),
            "reason": reason,
        }
        emit(conn, tenant_of(agent_key), MEMORY_SUPERSEDED, data)


def document_deleted(
    conn: Connection[Any],
    tenant_id: str,
    agent_id: str,
    document_id: str,
    counts: dict[str, Any],
    *,
    expired: str | None = None,
) -> None:
    """`document.deleted`; `expired` when a job deleted it past its retention ("trash",
    "temporary")."""
    data = {"agent_id": agent_id, "document_id": document_id, "deleted": counts}
    if expired is not None:
        data["expired"] = expired
    emit(conn, tenant_id, DOCUMENT_DELETED, data)


def document_trashed(
    conn: Connection[Any], tenant_id: str, agent_id: str, document_id: str, state: dict[str, Any]
) -> None:
    """`document.trashed`: `state` is what the soft delete answers (its counts, when it went
    to the trash, when it will be deleted)."""
    data = {"agent_id": agent_id, "document_id": document_id, **state}
    emit(conn, tenant_id, DOCUMENT_TRASHED, data)


def document_restored(
    conn: Connection[Any], tenant_id: str, agent_id: str, document_id: str, counts: dict[str, Any]
) -> None:
    data = {"agent_id": agent_id, "document_id": document_id, "restored": counts}
    emit(conn, tenant_id, DOCUMENT_RESTORED, data)
