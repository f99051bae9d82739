"""Conversation sync and index routes (seed 002 §7.7, §7.11): edit or delete one message,
the index's status and rebuild, the consistency check and repair. Search itself is served by
the query service (routes/conversation_search.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from memora.basics.models import AGENT_ID_PATTERN, DOCUMENT_ID_PATTERN
from memora.usecases import conversations, ingest
from services.api.deps import ConnDep, ContextDep, Priority, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.metrics import note_operation
from services.api.schemas.conversations import (
    AppendRequest,
    AppendResponse,
    MessageEdit,
    MessageSyncResponse,
)

router = APIRouter(
    prefix="/api", tags=["conversations"], responses=error_responses(*AUTH_ERRORS, 422, 503)
)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
ConversationPath = Annotated[str, Path(pattern=DOCUMENT_ID_PATTERN)]
MESSAGE_PATH = "/agents/{agent_id}/documents/{document_id:path}/messages/{message_id}"


@router.post(
    "/agents/{agent_id}/conversations/{conversation_id:path}/messages",
    status_code=202,
    response_model=AppendResponse,
    responses=error_responses(*BODY_ERRORS, 404, 409),  # 404: a path that names no route
)
def append(
    request: Request,
    scope: ScopeDep,
    agent_id: AgentPath,
    conversation_id: ConversationPath,
    body: AppendRequest,
    conn: ConnDep,
    context: ContextDep,
    priority: Priority = "live",
) -> AppendResponse:
    """Append messages to a live conversation (created on first use; it is the document
    `conversation_id`). Only the new messages are processed; a message id already there is
    skipped (safe retries), with other content it is 409 `message_conflict`.
    `end_of_conversation`: once these messages are processed, the agent's evolution runs
    (`POST /api/agents/{agent_id}/evolve`)."""
    done = ingest.append(
        context, conn, scope, agent_id, conversation_id, list(body.messages),
        title=body.title, backfill=priority == "backfill",
        end_of_conversation=body.end_of_conversation,
    )  # fmt: skip
    note_operation(request, done.operation_id)
    return AppendResponse.of(done)


@router.patch(
    MESSAGE_PATH,
    response_model=MessageSyncResponse,
    responses=error_responses(*BODY_ERRORS, 404, 409),  # 409: its conversation is in the trash
)
def edit(
    scope: ScopeDep,
    agent_id: AgentPath,
    document_id: str,
    message_id: str,
    body: MessageEdit,
    conn: ConnDep,
    context: ContextDep,
) -> MessageSyncResponse:
    """Edit one message: what was extracted from it alone is re-extracted and its chunks are
    re-indexed (operation kind `message_edit`); nothing else of the conversation is redone."""
    result = conversations.edit_message(
        context, conn, scope, agent_id, document_id, message_id, body.patch()
    )
    return MessageSyncResponse.of(result)


@router.delete(MESSAGE_PATH, response_model=MessageSyncResponse, responses=error_responses(404))
def delete(
    scope: ScopeDep,
    agent_id: AgentPath,
    document_id: str,
    message_id: str,
    conn: ConnDep,
    context: ContextDep,
) -> MessageSyncResponse:
    """Delete one message, now: its chunks, the units it was the only source of, and its place
    among other units' sources. Neighbours that shared a chunk with it are re-indexed."""
    result = conversations.delete_message(context, conn, scope, agent_id, document_id, message_id)
    return MessageSyncResponse.of(result)


@router.get("/agents/{agent_id}/conversation-index")
def conversation_index(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, context: ContextDep
) -> dict[str, Any]:
    """Messages, conversations and chunks indexed, the last sync, the embedding model and
    dimension of the live index, and whether the configured model differs."""
    return conversations.index_status(context, conn, scope, agent_id)


@router.post(
    "/agents/{agent_id}/conversation-index/reindex", status_code=202, responses=error_responses(409)
)
def reindex(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, context: ContextDep
) -> dict[str, Any]:
    """Rebuild the agent's conversation index with the configured embedding model, in the
    background; searches keep answering from the live index until the switch."""
    operation_id = conversations.reindex(context, conn, scope, agent_id)
    return {"agent_id": agent_id, "operation_id": str(operation_id)}


@router.post("/agents/{agent_id}/consistency-check")
def consistency_check(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, context: ContextDep
) -> dict[str, Any]:
    """What no longer matches the messages: orphaned chunks and units, messages never indexed,
    stale chunks, units without an embedding (counts and up to 100 ids of each)."""
    report = conversations.check(context, conn, scope, agent_id)
    return {"agent_id": agent_id, **report.as_dict()}


@router.post("/agents/{agent_id}/repair")
def repair(
    scope: ScopeDep,
    agent_id: AgentPath,
    conn: ConnDep,
    context: ContextDep,
    dry_run: Annotated[bool, Query(description="report only")] = False,
) -> dict[str, Any]:
    """The consistency check, then its repair: orphaned and stale chunks and orphaned units
    are deleted; `repair` operations embed and index what is missing."""
    report = conversations.repair(context, conn, scope, agent_id, dry_run=dry_run)
    return {"agent_id": agent_id, "dry_run": dry_run, **report.as_dict()}
