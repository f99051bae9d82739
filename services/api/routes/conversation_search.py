"""POST /api/conversation_search (seed 002 §7.5): hybrid search over raw messages."""

from __future__ import annotations

from fastapi import APIRouter, Response

from memora.usecases import conversations
from services.api.deps import ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.reads import ReadsDep
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
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 404, 409),
)
async def conversation_search(
    scope: ScopeDep, body: ConversationSearchRequest, reads: ReadsDep, response: Response
) -> ConversationSearchResponse:
    """Messages of the agent's conversations that match the query, one result per message."""
    query = body.to_query()
    hits = await reads.run(
        response,
        scope,
        body.after_operation,
        lambda side: conversations.search(side.context, scope, query),
    )
    return ConversationSearchResponse(
        query=body.query,
        total_results=len(hits),
        results=[ConversationResult.of(i + 1, h) for i, h in enumerate(hits)],
    )
