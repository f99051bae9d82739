"""Write routes: store memories, follow operations, list and delete documents; and one memory
in full (its view: the lifecycle's state and history with the graph's entities and links)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request

from memora.basics.models import AGENT_ID_PATTERN
from memora.usecases import documents, ingest, memories, operations
from services.api.deps import (
    ConnDep,
    ContextDep,
    Offset,
    PrincipalDep,
    Priority,
    ScopeDep,
    actor_of,
)
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.metrics import note_operation
from services.api.schemas.memories import (
    BatchRequest,
    BatchResponse,
    DeleteResponse,
    DocumentDetail,
    DocumentList,
    DocumentSummary,
    Memory,
    RestoreResponse,
)
from services.api.schemas.operations import OperationResponse

SOFT = (
    "put the document in the trash instead: out of memory search, conversation search and think, "
    "restorable with POST .../restore until MEMORA_TRASH_RETENTION_DAYS have passed, then "
    "deleted for real"
)
router = APIRouter(
    prefix="/api", tags=["memories"], responses=error_responses(*AUTH_ERRORS, 422, 503)
)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


@router.post(
    "/memories/batch",
    response_model=BatchResponse,
    responses=error_responses(*BODY_ERRORS, 409),  # 409: the document is in the trash
)
def store_batch(
    request: Request,
    scope: ScopeDep,
    body: BatchRequest,
    conn: ConnDep,
    context: ContextDep,
    priority: Priority = "live",
) -> BatchResponse:
    """Make the raw items durable, then enqueue extraction. Idempotent per document_id;
    `update_mode: append` adds the items to the document as new messages."""
    backfill = priority == "backfill"
    if body.update_mode == "append":
        assert body.document_id is not None  # the model requires it
        done = ingest.append(
            context, conn, scope, body.agent_id, body.document_id, body.items,
            title=body.title, backfill=backfill,
        )  # fmt: skip
        note_operation(request, done.operation_id)
        return BatchResponse.of_append(done, len(body.items))
    accepted = ingest.ingest(
        context, conn, scope, body.agent_id, body.items, body.document_id,
        title=body.title, backfill=backfill,
    )  # fmt: skip
    note_operation(request, accepted.operation_id)
    return BatchResponse.of(accepted)


@router.get(
    "/operations/{operation_id}", response_model=OperationResponse, responses=error_responses(404)
)
def get_operation(
    scope: ScopeDep, operation_id: UUID, conn: ConnDep, context: ContextDep
) -> OperationResponse:
    """Only operations of the caller's tenant's agents; any other id is 404."""
    return OperationResponse.model_validate(operations.get(context, conn, scope, operation_id))


# The one handler of this path in either deployment: the query service serves none, the write
# API forwards none of it (tests/unit/test_route_owners.py).
@router.get(
    "/agents/{agent_id}/memories/{memory_id}",
    response_model=Memory,
    responses=error_responses(404),
)
def get_memory(
    scope: ScopeDep, agent_id: AgentPath, memory_id: UUID, conn: ConnDep, context: ContextDep
) -> Memory:
    """One memory in full, in any status: text, dates, confidence, metadata, status (when and
    why it changed, what superseded it), source document, entities, links (explicit first,
    then the strongest; 50 at most), history (every change, oldest first) and the memories it
    replaced. 404 `memory_not_found` for an id the agent does not hold."""
    return Memory.model_validate(memories.view(context, conn, scope, agent_id, memory_id))


@router.get("/agents/{agent_id}/documents", response_model=DocumentList)
def list_documents(
    scope: ScopeDep,
    agent_id: AgentPath,
    conn: ConnDep,
    context: ContextDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
    trashed: Annotated[
        bool, Query(description="list the documents in the trash instead of the live ones")
    ] = False,
) -> DocumentList:
    rows = documents.list_documents(
        context, conn, scope, agent_id, limit=limit, offset=offset, trashed=trashed
    )
    return DocumentList(
        agent_id=agent_id, documents=[DocumentSummary.model_validate(r) for r in rows]
    )


@router.get(
    "/agents/{agent_id}/documents/{document_id:path}",
    response_model=DocumentDetail,
    responses=error_responses(404),
)
def get_document(
    scope: ScopeDep, agent_id: AgentPath, document_id: str, conn: ConnDep, context: ContextDep
) -> DocumentDetail:
    """The document's raw items exactly as they were stored (in the trash too)."""
    return DocumentDetail.model_validate(documents.get(context, conn, scope, agent_id, document_id))


# A document id may end in "/restore": GET and DELETE of it reach the document's routes, which
# take no POST; POST of ".../restore" is this one.
@router.post(
    "/agents/{agent_id}/documents/{document_id:path}/restore",
    response_model=RestoreResponse,
    responses=error_responses(404, 409, 410),
)
def restore_document(
    principal: PrincipalDep,
    agent_id: AgentPath,
    document_id: str,
    conn: ConnDep,
    context: ContextDep,
) -> RestoreResponse:
    """Take a document out of the trash: its memories back to the status each had, its
    messages back in conversation search. 409 `not_trashed` for a live document, 404 for none,
    410 `retention_expired` past the trash's retention."""
    restored = documents.restore(
        context, conn, principal.scope, agent_id, document_id, actor=actor_of(principal)
    )
    return RestoreResponse(success=True, agent_id=agent_id, document_id=document_id, **restored)


# 404: no route matches a document id with a newline (no stored id has one)
@router.delete(
    "/agents/{agent_id}/documents/{document_id:path}",
    response_model=DeleteResponse,
    response_model_exclude_unset=True,
    responses=error_responses(404),
)
def delete_document(
    principal: PrincipalDep,
    agent_id: AgentPath,
    document_id: str,
    conn: ConnDep,
    context: ContextDep,
    soft: Annotated[bool, Query(description=SOFT)] = False,
) -> DeleteResponse:
    """Hard delete of the raw content, its operations, units, their links and entity references,
    and entities nothing mentions any more; a document already gone succeeds with zero counts.
    `soft=true`: into the trash instead (restorable), with `state`, `trashed_at` and
    `purge_after`; again: zero counts and `already_trashed`."""
    scope = principal.scope
    if soft:
        trashed = documents.soft_delete(
            context, conn, scope, agent_id, document_id, actor=actor_of(principal)
        )
        return DeleteResponse(success=True, agent_id=agent_id, document_id=document_id, **trashed)
    deleted = documents.delete(context, conn, scope, agent_id, document_id)
    return DeleteResponse(success=True, agent_id=agent_id, document_id=document_id, deleted=deleted)
