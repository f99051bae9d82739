"""POST /api/conversation_search (seed 002 §7.5): hybrid search over raw messages."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from memora.basics.models import AgentId, DocumentId, Role, StorableText, aware
from memora.retrieval.conversation import (
    MAX_LIMIT,
    ConversationHit,
    ConversationQuery,
    search_with_settings,
)
from services.api.deps import ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses, index_disabled

router = APIRouter(prefix="/api", tags=["conversations"])
When = Annotated[datetime | None, AfterValidator(aware)]


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: When = None
    end: When = None

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and self.start > self.end:
            raise ValueError("time_range.start must not be after time_range.end")
        return self


class ConversationSearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[StorableText, Field(min_length=1, max_length=2000)]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 5
    document_id: Annotated[DocumentId | None, Field(description="one conversation only")] = None
    time_range: TimeRange | None = None
    roles: Annotated[list[Role] | None, Field(min_length=1)] = None
    min_score: Annotated[
        float | None, Field(ge=0, le=1, description="default: MEMORA_CONVERSATION_MIN_SCORE")
    ] = None

    @model_validator(mode="after")
    def _not_blank(self) -> ConversationSearchRequest:
        if not self.query.strip():
            raise ValueError("query must not be empty or whitespace")
        return self


class ConversationResult(BaseModel):
    rank: int
    score: float
    conversation_id: str
    conversation_title: str | None
    message_id: str
    message_ids: list[str]
    role: str | None
    speaker: str | None
    timestamp: datetime
    snippet: str
    vector_score: float
    keyword_score: float


class ConversationSearchResponse(BaseModel):
    query: str
    total_results: int
    results: list[ConversationResult]


def _result(rank: int, hit: ConversationHit) -> ConversationResult:
    return ConversationResult(
        rank=rank,
        score=hit.score,
        conversation_id=hit.document_id,
        conversation_title=hit.title,
        message_id=hit.message_id,
        message_ids=hit.message_ids,
        role=hit.role,
        speaker=hit.speaker,
        timestamp=hit.timestamp,
        snippet=hit.snippet,
        vector_score=hit.vector_score,
        keyword_score=hit.keyword_score,
    )


@router.post(
    "/conversation_search",
    response_model=ConversationSearchResponse,
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 409),
)
async def conversation_search(
    request: Request, scope: ScopeDep, body: ConversationSearchRequest
) -> ConversationSearchResponse:
    """Messages of the agent's conversations that match the query, one result per message."""
    state = request.app.state
    if not state.settings.conversation_index:
        raise index_disabled()
    query = ConversationQuery(
        agent_id=body.agent_id,
        query=body.query,
        limit=body.limit,
        document_id=body.document_id,
        start=body.time_range.start if body.time_range else None,
        end=body.time_range.end if body.time_range else None,
        roles=body.roles,
        min_score=body.min_score,
    )

    def run() -> list[ConversationHit]:
        with state.pool.connection() as conn:
            return search_with_settings(conn, state.embedder, state.settings, scope, query)

    hits = await run_in_threadpool(run)
    return ConversationSearchResponse(
        query=body.query,
        total_results=len(hits),
        results=[_result(i + 1, h) for i, h in enumerate(hits)],
    )
