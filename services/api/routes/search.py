"""Read routes: /api/search and the per-network variants (seed 003 "Search Memories")."""

from __future__ import annotations

from fastapi import APIRouter, Response

from memora.basics.models import FACT_TYPES
from memora.basics.tenancy import Scope
from memora.retrieval import SearchParams
from memora.usecases.follow_up import FollowedUp, search_with_follow_up
from services.api.deps import ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.reads import Reads, ReadsDep, ReadSide
from services.api.schemas.search import (
    FollowUp,
    FollowUpError,
    NetworkSearchRequest,
    SearchableType,
    SearchRequest,
    SearchResponse,
    SearchResult,
)
from services.api.schemas.usage import LLMUsage
from services.api.upstream import llm_api_error

router = APIRouter(prefix="/api", tags=["search"])
RESPONSES = error_responses(*AUTH_ERRORS, *BODY_ERRORS, 404, 503)  # 404: after_operation


async def run_search(
    reads: Reads,
    response: Response,
    scope: Scope,
    body: NetworkSearchRequest,
    fact_types: list[SearchableType],
) -> SearchResponse:
    """On the read replica, or the primary (services.api.reads)."""
    params = body.params(scope, fact_types)
    if body.follow_up:
        followed = await reads.run(
            response, scope, body.after_operation, lambda side: _followed_up(side, params)
        )
        outcome = followed.outcome
        follow_up = FollowUp(
            queries=followed.queries, usage=LLMUsage(**followed.usage), error=_error(followed)
        )
    else:
        outcome = await reads.run(
            response, scope, body.after_operation, lambda side: side.retriever.search(params)
        )
        follow_up = None
    return SearchResponse.model_construct(  # the retriever's own typed values: not validated again
        results=[SearchResult.model_construct(**vars(hit)) for hit in outcome.hits],
        trace=outcome.trace,
        follow_up=follow_up,
    )


def _error(followed: FollowedUp) -> FollowUpError | None:
    if followed.failed is None:
        return None
    error = llm_api_error(followed.failed)
    return FollowUpError(code=error.code, message=error.message)


def _followed_up(side: ReadSide, params: SearchParams) -> FollowedUp:
    client = side.context.llm.get()  # not configured: refused (503) before any search
    return search_with_follow_up(
        side.retriever, client, params, side.context.settings.follow_up_queries
    )


@router.post("/search", response_model=SearchResponse, responses=RESPONSES)
async def search(
    scope: ScopeDep, reads: ReadsDep, response: Response, body: SearchRequest
) -> SearchResponse:
    """The three networks, or those named in `fact_type` ("reflection" included)."""
    return await run_search(reads, response, scope, body, body.fact_type or list(FACT_TYPES))


@router.post("/world_search", response_model=SearchResponse, responses=RESPONSES)
async def world_search(
    scope: ScopeDep, reads: ReadsDep, response: Response, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(reads, response, scope, body, ["world"])


@router.post("/agent_search", response_model=SearchResponse, responses=RESPONSES)
async def agent_search(
    scope: ScopeDep, reads: ReadsDep, response: Response, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(reads, response, scope, body, ["agent"])


@router.post("/opinion_search", response_model=SearchResponse, responses=RESPONSES)
async def opinion_search(
    scope: ScopeDep, reads: ReadsDep, response: Response, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(reads, response, scope, body, ["opinion"])
