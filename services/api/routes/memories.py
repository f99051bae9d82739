"""Write routes: store memories, follow operations, list and delete documents."""

from __future__ import annotations

import logging
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Header, Path, Query, Request

from memora.basics import metrics
from memora.basics.models import AGENT_ID_PATTERN
from memora.basics.stages import INGEST_STAGES
from memora.pipeline.backend import TaskBackend
from memora.store import documents
from memora.usecases import operations
from memora.usecases.ingest import accept_batch
from services.api.deps import BackendDep, ConnDep, Offset, ScopeDep, SettingsDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses
from services.api.metrics import note_operation
from services.api.schemas import (
    BatchRequest,
    BatchResponse,
    DeleteResponse,
    DocumentDetail,
    DocumentList,
    DocumentSummary,
    OperationResponse,
)

log = logging.getLogger("memora.api.memories")
router = APIRouter(
    prefix="/api", tags=["memories"], responses=error_responses(*AUTH_ERRORS, 422, 503)
)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
# Backfills (`memora backfill`) send "backfill": the pipeline then runs on the low-priority
# `<stage>.backfill` queues, so live traffic keeps flowing.
Priority = Annotated[
    Literal["live", "backfill"],
    Header(alias="X-Memora-Priority", description="`backfill`: process on the backfill queues"),
]


def enqueue(backend: TaskBackend, operation_id: UUID, *, backfill: bool = False) -> None:
    """Start the pipeline of an accepted operation."""
    try:
        backend.enqueue(INGEST_STAGES[0], operation_id, backfill=backfill)
    except Exception:  # the content and its operation are durable: the reconciler
        # re-enqueues it once the broker is back (MEMORA_STUCK_AFTER_SECONDS)
        log.warning("broker unavailable; operation %s left to the reconciler",
                    operation_id, exc_info=True)  # fmt: skip


@router.post(
    "/memories/batch", response_model=BatchResponse, responses=error_responses(*BODY_ERRORS)
)
def store_batch(
    request: Request,
    scope: ScopeDep,
    body: BatchRequest,
    conn: ConnDep,
    backend: BackendDep,
    settings: SettingsDep,
    priority: Priority = "live",
) -> BatchResponse:
    """Make the raw items durable, then enqueue extraction. Idempotent per document_id."""
    if len(body.items) > settings.max_items_per_batch:
        raise APIError(
            422, "too_many_items", f"at most {settings.max_items_per_batch} items per batch"
        )
    too_long = [
        i for i, item in enumerate(body.items) if len(item.content) > settings.max_content_chars
    ]
    if too_long:
        raise APIError(
            422,
            "content_too_long",
            f"item content is limited to {settings.max_content_chars} characters",
            {"items": too_long[:20]},
        )
    backfill = priority == "backfill"
    accepted = accept_batch(
        conn, scope, body.agent_id, body.items, body.document_id, title=body.title,
        backfill=backfill,
    )  # fmt: skip
    metrics.observe_accepted(accepted.outcome, accepted.items_count, backfill=backfill)
    note_operation(request, accepted.operation_id)
    if accepted.needs_processing:
        enqueue(backend, accepted.operation_id, backfill=backfill)
    message = {
        "created": f"Successfully stored {accepted.items_count} memory items",
        "replaced": f"Replaced document content with {accepted.items_count} memory items",
        "unchanged": "Document already stored with identical content; nothing new was created",
    }[accepted.outcome]
    return BatchResponse(
        success=True,
        message=message,
        agent_id=accepted.agent_id,
        document_id=accepted.document_id,
        items_count=accepted.items_count,
        operation_id=accepted.operation_id,
        status=accepted.outcome,
    )


@router.get(
    "/operations/{operation_id}", response_model=OperationResponse, responses=error_responses(404)
)
def get_operation(scope: ScopeDep, operation_id: UUID, conn: ConnDep) -> OperationResponse:
    """Only operations of the caller's tenant's agents; any other id is 404."""
    return OperationResponse.model_validate(operations.get(conn, scope, operation_id))


@router.get("/agents/{agent_id}/documents", response_model=DocumentList)
def list_documents(
    scope: ScopeDep,
    agent_id: AgentPath,
    conn: ConnDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> DocumentList:
    rows = documents.list_documents(conn, scope, agent_id, limit=limit, offset=offset)
    return DocumentList(
        agent_id=agent_id, documents=[DocumentSummary.model_validate(r) for r in rows]
    )


@router.get(
    "/agents/{agent_id}/documents/{document_id:path}",
    response_model=DocumentDetail,
    responses=error_responses(404),
)
def get_document(
    scope: ScopeDep, agent_id: AgentPath, document_id: str, conn: ConnDep
) -> DocumentDetail:
    """The document's raw items exactly as they were stored."""
    row = documents.find_document(conn, scope, agent_id, document_id)
    if row is None:
        raise APIError(404, "not_found", f"document {document_id!r} not found")
    return DocumentDetail.model_validate({**row, "agent_id": agent_id})


# 404: no route matches a document id with a newline (no stored id has one)
@router.delete(
    "/agents/{agent_id}/documents/{document_id:path}",
    response_model=DeleteResponse,
    responses=error_responses(404),
)
def delete_document(
    scope: ScopeDep, agent_id: AgentPath, document_id: str, conn: ConnDep
) -> DeleteResponse:
    """Hard delete of the raw content, its operations, units, their links and entity references,
    and entities nothing mentions any more; a document already gone succeeds with zero counts."""
    with conn.transaction():
        deleted = documents.delete_document(conn, scope, agent_id, document_id)
    return DeleteResponse(
        success=True,
        agent_id=agent_id,
        document_id=document_id,
        deleted=deleted
        or {
            "units_deleted": 0,
            "entities_deleted": 0,
            "links_deleted": 0,
            "operations_deleted": 0,
            "messages_deleted": 0,
            "chunks_deleted": 0,
            "already_absent": True,
        },
    )
