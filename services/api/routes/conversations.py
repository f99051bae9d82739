"""Conversation sync and index routes (seed 002 §7.7, §7.11): edit or delete one message,
the index's status and rebuild, the consistency check and repair. Search itself is served by
the query service (routes/conversation_search.py)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from memora.basics.models import AGENT_ID_PATTERN, Role, StorableText, aware
from memora.basics.stages import OperationKind, Stage, first_stage
from memora.conversations import consistency
from memora.conversations.index import request_reindex, status
from memora.conversations.sync import (
    MessageNotFound,
    MessagePatch,
    SyncResult,
    delete_message,
    edit_message,
)
from memora.pipeline.backend import TaskBackend
from services.api.deps import BackendDep, ConnDep, ScopeDep, SettingsDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses, index_disabled

log = logging.getLogger("memora.api.conversations")
router = APIRouter(
    prefix="/api", tags=["conversations"], responses=error_responses(*AUTH_ERRORS, 422, 503)
)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
MESSAGE_PATH = "/agents/{agent_id}/documents/{document_id:path}/messages/{message_id}"


class MessageEdit(BaseModel):
    """What changes; omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    content: StorableText | None = Field(default=None, min_length=1)
    role: Role | None = None
    speaker: StorableText | None = Field(default=None, max_length=200)
    event_date: Annotated[datetime | None, AfterValidator(aware)] = None

    @model_validator(mode="after")
    def _something(self) -> MessageEdit:
        if self.content is not None and not self.content.strip():
            raise ValueError("content must not be empty or whitespace")
        if not self.model_fields_set:
            raise ValueError("give at least one of content, role, speaker, event_date")
        return self


class MessageSyncResponse(BaseModel):
    success: bool
    agent_id: str
    document_id: str
    message_id: str
    operation_id: UUID | None = Field(description="the pipeline work it started, if any")
    counts: dict[str, int]


def _enqueue(backend: TaskBackend, stage: Stage, operation_id: UUID | None) -> None:
    if operation_id is None:
        return
    try:
        backend.enqueue(stage, operation_id)
    except Exception:  # durable: the reconciler re-enqueues it once the broker is back
        log.warning("broker unavailable; operation left to the reconciler",
                    extra={"operation": str(operation_id)}, exc_info=True)  # fmt: skip


def _response(result: SyncResult) -> MessageSyncResponse:
    return MessageSyncResponse(
        success=True,
        agent_id=result.agent_id,
        document_id=result.document_id,
        message_id=result.message_id,
        operation_id=result.operation_id,
        counts=result.counts,
    )


def _not_found(document_id: str, message_id: str) -> APIError:
    return APIError(
        404, "not_found", f"message {message_id!r} of document {document_id!r} not found"
    )


@router.patch(
    MESSAGE_PATH,
    response_model=MessageSyncResponse,
    responses=error_responses(*BODY_ERRORS, 404),
)
def edit(
    scope: ScopeDep,
    agent_id: AgentPath,
    document_id: str,
    message_id: str,
    body: MessageEdit,
    conn: ConnDep,
    backend: BackendDep,
    settings: SettingsDep,
) -> MessageSyncResponse:
    """Edit one message: what was extracted from it alone is re-extracted and its chunks are
    re-indexed (operation kind `message_edit`); nothing else of the conversation is redone."""
    if body.content is not None and len(body.content) > settings.max_content_chars:
        limit = settings.max_content_chars
        raise APIError(422, "content_too_long", f"content is limited to {limit} characters")
    patch = MessagePatch(body.content, body.role, body.speaker, body.event_date)
    try:
        with conn.transaction():
            result = edit_message(conn, scope, agent_id, document_id, message_id, patch)
    except MessageNotFound:
        raise _not_found(document_id, message_id) from None
    _enqueue(backend, first_stage(OperationKind.MESSAGE_EDIT), result.operation_id)
    return _response(result)


@router.delete(MESSAGE_PATH, response_model=MessageSyncResponse, responses=error_responses(404))
def delete(
    scope: ScopeDep,
    agent_id: AgentPath,
    document_id: str,
    message_id: str,
    conn: ConnDep,
    backend: BackendDep,
) -> MessageSyncResponse:
    """Delete one message, now: its chunks, the units it was the only source of, and its place
    among other units' sources. Neighbours that shared a chunk with it are re-indexed."""
    try:
        with conn.transaction():
            result = delete_message(conn, scope, agent_id, document_id, message_id)
    except MessageNotFound:
        raise _not_found(document_id, message_id) from None
    _enqueue(backend, first_stage(OperationKind.MESSAGE_DELETE), result.operation_id)
    return _response(result)


@router.get("/agents/{agent_id}/conversation-index")
def conversation_index(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, settings: SettingsDep
) -> dict[str, Any]:
    """Messages, conversations and chunks indexed, the last sync, the embedding model and
    dimension of the live index, and whether the configured model differs."""
    return {"agent_id": agent_id, **status(conn, scope.key(agent_id), settings)}


@router.post(
    "/agents/{agent_id}/conversation-index/reindex", status_code=202, responses=error_responses(409)
)
def reindex(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, backend: BackendDep, settings: SettingsDep
) -> dict[str, Any]:
    """Rebuild the agent's conversation index with the configured embedding model, in the
    background; searches keep answering from the live index until the switch."""
    if not settings.conversation_index:
        raise index_disabled()
    with conn.transaction():
        operation_id = request_reindex(conn, scope.key(agent_id))
    _enqueue(backend, first_stage(OperationKind.REINDEX), operation_id)
    return {"agent_id": agent_id, "operation_id": str(operation_id)}


@router.post("/agents/{agent_id}/consistency-check")
def consistency_check(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, settings: SettingsDep
) -> dict[str, Any]:
    """What no longer matches the messages: orphaned chunks and units, messages never indexed,
    stale chunks, units without an embedding (counts and up to 100 ids of each)."""
    report = consistency.check(conn, scope.key(agent_id), settings.indexed_roles)
    conn.rollback()
    return {"agent_id": agent_id, **report.as_dict()}


@router.post("/agents/{agent_id}/repair")
def repair(
    scope: ScopeDep,
    agent_id: AgentPath,
    conn: ConnDep,
    backend: BackendDep,
    settings: SettingsDep,
    dry_run: Annotated[bool, Query(description="report only")] = False,
) -> dict[str, Any]:
    """The consistency check, then its repair: orphaned and stale chunks and orphaned units
    are deleted; `repair` operations embed and index what is missing."""
    roles = settings.indexed_roles
    if dry_run:
        report = consistency.check(conn, scope.key(agent_id), roles)
        conn.rollback()
    else:
        with conn.transaction():
            report = consistency.repair(conn, scope.key(agent_id), roles)
        for operation_id, stage in report.operations:
            _enqueue(backend, stage, operation_id)
    return {"agent_id": agent_id, "dry_run": dry_run, **report.as_dict()}
