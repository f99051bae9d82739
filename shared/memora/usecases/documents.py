"""A tenant's documents: list them, read one's raw items as posted, delete one (hard and
idempotent)."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from memora.basics.errors import NotFound
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.store import documents
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


def list_documents(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, *, limit: int, offset: int
) -> list[dict[str, Any]]:
    return documents.list_documents(conn, scope, agent_id, limit=limit, offset=offset)


def get(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, document_id: str
) -> dict[str, Any]:
    """The document's raw items exactly as they were stored."""
    row = documents.find_document(conn, scope, agent_id, document_id)
    if row is None:
        raise NotFound("not_found", f"document {document_id!r} not found")
    return {**row, "agent_id": agent_id}


def delete(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, document_id: str
) -> dict[str, Any]:
    """Hard delete of the raw content, its operations, units, their links and entity
    references, and entities nothing mentions any more; a document already gone is deleted
    again with zero counts (`already_absent`)."""
    with conn.transaction():
        deleted = documents.delete_document(conn, scope, agent_id, document_id)
        if deleted:
            webhooks.document_deleted(conn, scope.tenant_id, agent_id, document_id, deleted)
    webhooks.dispatch_committed(conn, app.backend)
    return deleted or {**NOTHING_DELETED, "already_absent": True}
