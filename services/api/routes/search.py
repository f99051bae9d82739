"""Read routes: /api/search and the per-network variants (seed 003 "Search Memories")."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from memora.basics.models import FACT_TYPES
from memora.basics.tenancy import Scope
from memora.retrieval import Retriever
from services.api.deps import RetrieverDep, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.search import (
    NetworkSearchRequest,
    SearchableType,
    SearchRequest,
    SearchResponse,
    SearchResult,
)

router = APIRouter(prefix="/api", tags=["search"])
RESPONSES = error_responses(*AUTH_ERRORS, *BODY_ERRORS, 503)


async def run_search(
    retriever: Retriever, scope: Scope, body: NetworkSearchRequest, fact_types: list[SearchableType]
) -> SearchResponse:
    outcome = await run_in_threadpool(retriever.search, body.params(scope, fact_types))
    return SearchResponse.model_construct(  # the retriever's own typed values: not validated again
        results=[SearchResult.model_construct(**vars(hit)) for hit in outcome.hits],
        trace=outcome.trace,
    )


@router.post("/search", response_model=SearchResponse, responses=RESPONSES)
async def search(scope: ScopeDep, retriever: RetrieverDep, body: SearchRequest) -> SearchResponse:
    """The three networks, or those named in `fact_type` ("reflection" included)."""
    return await run_search(retriever, scope, body, body.fact_type or list(FACT_TYPES))


@router.post("/world_search", response_model=SearchResponse, responses=RESPONSES)
async def world_search(
    scope: ScopeDep, retriever: RetrieverDep, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(retriever, scope, body, ["world"])


@router.post("/agent_search", response_model=SearchResponse, responses=RESPONSES)
async def agent_search(
    scope: ScopeDep, retriever: RetrieverDep, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(retriever, scope, body, ["agent"])


@router.post("/opinion_search", response_model=SearchResponse, responses=RESPONSES)
async def opinion_search(
    scope: ScopeDep, retriever: RetrieverDep, body: NetworkSearchRequest
) -> SearchResponse:
    return await run_search(retriever, scope, body, ["opinion"])
