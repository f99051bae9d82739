"""Read routes: /api/search and the per-network variants (seed 003 "Search Memories")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memora.basics.models import FACT_TYPES, AgentId, FactType, StorableText, aware
from memora.basics.tenancy import Scope
from memora.retrieval import RerankerUnavailable, Retriever, SearchParams
from memora.retrieval.filters import Filters
from services.api.deps import ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses

router = APIRouter(prefix="/api", tags=["search"])


class NetworkSearchRequest(BaseModel):
    """The body of /api/world_search, /api/agent_search and /api/opinion_search."""

    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[StorableText, Field(min_length=1, max_length=2000)]
    thinking_budget: Annotated[int, Field(ge=1, le=1000)] = 100
    top_k: Annotated[int, Field(ge=1, le=200)] = 10
    reranker: Literal["heuristic", "cross-encoder"] = "heuristic"
    trace: bool = False
    max_tokens: Annotated[
        int | None,
        Field(ge=1, le=200_000, description="token budget of the results (default 4096)"),
    ] = None
    reference_time: Annotated[
        datetime | None,
        AfterValidator(aware),
        Field(description="the time relative dates in the query refer to (default: now)"),
    ] = None
    filters: Annotated[
        Filters | None,
        Field(
            description='only memories matching these: metadata equality (`{"category": '
            '"identity"}`), one-of lists, numeric ranges (`{"turn": {"gte": 3}}`), '
            "`tags` (`any`/`all`) and `time` (`start`/`end`); applied inside every retriever"
        ),
    ] = None


class SearchRequest(NetworkSearchRequest):
    fact_type: Annotated[list[FactType] | None, Field(min_length=1)] = None


class SearchResult(BaseModel):
    id: UUID
    text: str
    context: str | None = None
    event_date: datetime | None = None
    weight: float
    fact_type: FactType
    metadata: dict[str, Any] | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None


class SearchResponse(BaseModel):
    results: list[SearchResult]
    trace: dict[str, Any] | None = None


def retriever(request: Request) -> Retriever:
    found: Retriever = request.app.state.retriever
    return found


async def run_search(
    request: Request, scope: Scope, body: NetworkSearchRequest, fact_types: list[FactType]
) -> SearchResponse:
    params = SearchParams(
        scope=scope,
        agent_id=body.agent_id,
        query=body.query,
        fact_types=tuple(dict.fromkeys(fact_types)),
        thinking_budget=body.thinking_budget,
        top_k=body.top_k,
        reranker=body.reranker,
        max_tokens=body.max_tokens,
        reference_time=body.reference_time,
        trace=body.trace,
        filters=body.filters,
    )
    try:
        outcome = await run_in_threadpool(retriever(request).search, params)
    except RerankerUnavailable as exc:
        raise APIError(503, "reranker_unavailable", str(exc)) from exc
    return SearchResponse(
        results=[SearchResult.model_validate(hit, from_attributes=True) for hit in outcome.hits],
        trace=outcome.trace,
    )


RESPONSES = error_responses(*AUTH_ERRORS, *BODY_ERRORS, 503)


@router.post("/search", response_model=SearchResponse, responses=RESPONSES)
async def search(scope: ScopeDep, request: Request, body: SearchRequest) -> SearchResponse:
    """All networks, or those named in `fact_type`."""
    return await run_search(request, scope, body, body.fact_type or list(FACT_TYPES))


@router.post("/world_search", response_model=SearchResponse, responses=RESPONSES)
async def world_search(
    scope: ScopeDep, request: Request, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(request, scope, body, ["world"])


@router.post("/agent_search", response_model=SearchResponse, responses=RESPONSES)
async def agent_search(
    scope: ScopeDep, request: Request, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(request, scope, body, ["agent"])


@router.post("/opinion_search", response_model=SearchResponse, responses=RESPONSES)
async def opinion_search(
    scope: ScopeDep, request: Request, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(request, scope, body, ["opinion"])
