"""Write routes: store memories, follow operations, list and delete documents."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query

from memora.ingest import accept_batch
from memora.models import AGENT_ID_PATTERN
from memora.pipeline.stages import INGEST_STAGES
from memora.store import documents, operations
from services.api.deps import BackendDep, ConnDep, SettingsDep
from services.api.errors import APIError
from services.api.schemas import (
    BatchRequest,
    BatchResponse,
    DeleteResponse,
    DocumentList,
    DocumentSummary,
    OperationResponse,
)

router = APIRouter(prefix="/api", tags=["memories"])
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


@router.post("/memories/batch", response_model=BatchResponse)
def store_batch(
    body: BatchRequest, conn: ConnDep, backend: BackendDep, settings: SettingsDep
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
    accepted = accept_batch(conn, body.agent_id, body.items, body.document_id)
    if accepted.needs_processing:
        backend.enqueue(INGEST_STAGES[0], accepted.operation_id)
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


@router.get("/operations/{operation_id}", response_model=OperationResponse)
def get_operation(operation_id: UUID, conn: ConnDep) -> OperationResponse:
    op = operations.get_operation(conn, operation_id)
    if op is None:
        raise APIError(404, "not_found", f"operation {operation_id} not found")
    return OperationResponse.model_validate(op)


@router.get("/agents/{agent_id}/documents", response_model=DocumentList)
def list_documents(
    agent_id: AgentPath,
    conn: ConnDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> DocumentList:
    rows = documents.list_documents(conn, agent_id, limit=limit, offset=offset)
    return DocumentList(
        agent_id=agent_id, documents=[DocumentSummary.model_validate(r) for r in rows]
    )


@router.delete("/agents/{agent_id}/documents/{document_id:path}", response_model=DeleteResponse)
def delete_document(agent_id: AgentPath, document_id: str, conn: ConnDep) -> DeleteResponse:
    """Hard delete; deleting a document that is already gone succeeds with zero counts."""
    with conn.transaction():
        deleted = documents.delete_document(conn, agent_id, document_id)
    return DeleteResponse(
        success=True,
        agent_id=agent_id,
        document_id=document_id,
        deleted=deleted or {"units_deleted": 0, "entities_deleted": 0, "already_absent": True},
    )
