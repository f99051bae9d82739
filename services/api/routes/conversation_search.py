"""POST /api/conversation_search (seed 002 §7.5): hybrid search over raw messages."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from memora.usecases import conversations
from services.api.deps import ContextDep, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.conversations import (
    ConversationResult,
    ConversationSearchRequest,
    ConversationSearchResponse,
)

router = APIRouter(prefix="/api", tags=["conversations"])


@router.post(
    "/conversation_search",
    response_model=ConversationSearchResponse,
    response_model_exclude_unset=True,  # highlights only when asked for
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 409),
)
async def conversation_search(
    scope: ScopeDep,
    body: ConversationSearchRequest,
    context: ContextDep,
) -> ConversationSearchResponse:
    """Messages of the agent's conversations that match the query, one result per message."""
    hits = await run_in_threadpool(conversations.search, context, scope, body.to_query())
    return ConversationSearchResponse(
        query=body.query,
        total_results=len(hits),
        results=[ConversationResult.of(i + 1, h) for i, h in enumerate(hits)],
    )
