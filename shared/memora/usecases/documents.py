"""A tenant's documents: list them (live ones, or the trash), read one's raw items as posted,
delete one (hard and idempotent), put one in the trash and take it out again.

The trash (`DELETE ...?soft=true`) takes a document and what was learned from it out of
memory search, conversation search and think, restorable for MEMORA_TRASH_RETENTION_DAYS;
the document_expiry job then deletes it for real, as a hard delete does (memora.store.trash).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.errors import Conflict, Gone, NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.store import documents, trash
from memora.store import lifecycle as store
from memora.webhooks import events as webhooks

NOTHING_DELETED = {
    "units_deleted": 0,
    "entities_deleted": 0,
    "links_deleted": 0,
    "operations_deleted": 0,
    "messages_deleted": 0,
    "chunks_deleted": 0,
    "remaining": 0,
}
NOTHING_TRASHED = {"units_trashed": 0, "messages_hidden": 0, "chunks_hidden": 0}


def purge_after(settings: Settings, trashed_at: datetime | None) -> datetime | None:
    """When the document_expiry job deletes a document trashed at `trashed_at`."""
    if trashed_at is None:
        return None
    return trashed_at + timedelta(days=settings.trash_retention_days)


def _shown(app: AppContext, row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "purge_after": purge_after(app.settings, row["trashed_at"])}


def list_documents(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    *,
    limit: int,
    offset: int,
    trashed: bool = False,
) -> list[dict[str, Any]]:
    """The agent's live documents; `trashed`: those in the trash."""
    rows = documents.list_documents(
        conn, scope, agent_id, limit=limit, offset=offset, trashed=trashed
    )
    return [_shown(app, r) for r in rows]


def get(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, document_id: str
) -> dict[str, Any]:
    """The document's raw items exactly as they were stored (in the trash or not)."""
    row = documents.find_document(conn, scope, agent_id, document_id)
    if row is None:
        raise NotFound("not_found", f"document {document_id!r} not found")
    return {**_shown(app, row), "agent_id": agent_id}


def delete(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, document_id: str
) -> dict[str, Any]:
    """Hard delete of the raw content, its operations, units, their links and entity
    references, and entities nothing mentions any more (in the trash or not); a document
    already gone is deleted again with zero counts (`already_absent`)."""
    with conn.transaction():
        deleted = documents.delete_document(conn, scope, agent_id, document_id)
        if deleted:
            webhooks.document_deleted(conn, scope.tenant_id, agent_id, document_id, deleted)
    webhooks.dispatch_committed(conn, app.backend)
    return deleted or {**NOTHING_DELETED, "already_absent": True}


def soft_delete(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    document_id: str,
    *,
    actor: str = "api",
) -> dict[str, Any]:
    """Put the document in the trash, in one transaction: out of every search, restorable
    until `purge_after`. Its counts under `deleted` (units trashed, messages and chunks that
    conversation search leaves out), `state` `trashed`. Idempotent: a document in the trash
    already answers zero counts (`already_trashed`) and keeps its dates; one that does not
    exist answers zero counts (`already_absent`), `state` `absent`, as a hard delete does."""
    key = scope.key(agent_id)
    with conn.transaction():
        found = trash.lock(conn, key, document_id)
        if found is None:
            absent = {**NOTHING_TRASHED, "already_absent": True}
            return _trash_state(app.settings, absent, "absent", None)
        if found.trashed_at is not None:
            again = {**NOTHING_TRASHED, "already_trashed": True}
            return _trash_state(app.settings, again, "trashed", found.trashed_at)
        now = utcnow()
        moved = trash.trash(conn, key, found.pk, now)
        for status, ids in moved.units.items():
            store.record(conn, key, ids, "trashed", actor, reason="its document was trashed",
                         details={"document_id": document_id, "from": status})  # fmt: skip
        counts = {"units_trashed": moved.unit_count, "messages_hidden": moved.messages,
                  "chunks_hidden": moved.chunks}  # fmt: skip
        state = _trash_state(app.settings, counts, "trashed", now)
        webhooks.document_trashed(conn, scope.tenant_id, agent_id, document_id, _jsonable(state))
    webhooks.dispatch_committed(conn, app.backend)
    return state


def _trash_state(
    settings: Settings, counts: dict[str, Any], state: str, trashed_at: datetime | None
) -> dict[str, Any]:
    return {
        "deleted": counts,
        "state": state,
        "trashed_at": trashed_at,
        "purge_after": purge_after(settings, trashed_at),
    }


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in state.items()}


def restore(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    document_id: str,
    *,
    actor: str = "api",
) -> dict[str, Any]:
    """Take the document out of the trash, in one transaction: its units back to the status
    each had when it was trashed (units forgotten or archived before stay so), its messages
    back in conversation search. NotFound when there is no such document, Conflict
    (`not_trashed`) when it is not in the trash, Gone (`retention_expired`) past the
    retention (the document_expiry job is about to delete it)."""
    key = scope.key(agent_id)
    with conn.transaction():
        found = trash.lock(conn, key, document_id)
        if found is None:
            raise NotFound("not_found", f"document {document_id!r} not found")
        if found.trashed_at is None:
            raise Conflict(
                "not_trashed", f"document {document_id!r} is not in the trash",
                {"document_id": document_id},
            )  # fmt: skip
        until = purge_after(app.settings, found.trashed_at)
        if until is not None and until <= utcnow():
            days = app.settings.trash_retention_days
            raise Gone("retention_expired", f"trashed more than {days:g} days ago")
        moved = trash.restore(conn, key, found.pk, utcnow())
        for status, ids in moved.units.items():
            details = {"document_id": document_id, "from": "trashed", "to": status}
            store.record(conn, key, ids, "restored", actor, reason="its document was restored",
                         details=details)  # fmt: skip
        counts = {"units_restored": moved.unit_count, "messages_restored": moved.messages,
                  "chunks_restored": moved.chunks}  # fmt: skip
        webhooks.document_restored(conn, scope.tenant_id, agent_id, document_id, counts)
    webhooks.dispatch_committed(conn, app.backend)
    return {"restored": counts, "state": "active"}
