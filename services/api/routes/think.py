"""POST /api/think on the query service (seed 000 §4.3, seed 003 "Think and Generate Answer"):
the use case `memora.usecases.think.think`. An LLM that is not configured or not
reachable answers 503 with nothing stored (services.api.errors)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from memora.usecases.think import think
from services.api.deps import ContextDep, RetrieverDep, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.think import ThinkRequest, ThinkResponse

router = APIRouter(prefix="/api", tags=["think"])


@router.post(
    "/think",
    response_model=ThinkResponse,
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 502, 503),
)
async def think_route(
    scope: ScopeDep, body: ThinkRequest, context: ContextDep, retriever: RetrieverDep
) -> ThinkResponse:
    """The answer, what it was based on per network, and the opinions it formed (stored in the
    background: `opinions_operation_id`)."""
    thought = await run_in_threadpool(think, context, retriever, scope, body.to_query())
    return ThinkResponse.of(thought)
