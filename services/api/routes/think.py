"""POST /api/think on the query service (seed 000 §4.3, seed 003 "Think and Generate Answer").

The profile is read (defaults when the agent has none), the three networks are searched through
the read path (`memora.retrieval`), the LLM answers as the agent, and the opinions it expressed
are handed to the opinions stage (an 'opinions' operation, queue 'opinions'). The answer is
returned even when drawing or storing the opinions fails; an LLM that is not configured or not
reachable gives 503 with nothing stored.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from memora.basics.models import AgentId, utcnow
from memora.basics.stages import Stage
from memora.basics.tenancy import Scope
from memora.db.pool import Pool
from memora.nlp.llm import LLMError
from memora.pipeline.backend import TaskBackend
from memora.retrieval import RerankerUnavailable, Retriever, SearchParams
from memora.retrieval.filters import Filters
from memora.store import agents
from memora.think import opinions
from memora.think.personality import full_personality
from memora.think.reasoning import NETWORKS, Evidence, Profile, ThinkResult, think
from services.api.deps import ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses
from services.api.llm import llm_api_error, llm_client
from services.api.routes import search as search_routes
from services.workers.celery_app import create_celery
from services.workers.dispatch import CeleryBackend

log = logging.getLogger("memora.api.think")
router = APIRouter(prefix="/api", tags=["think"])


class ThinkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[str, Field(min_length=1, max_length=2000)]
    thinking_budget: Annotated[int, Field(ge=1, le=1000)] = 50
    top_k: Annotated[int, Field(ge=1, le=100)] = 10
    reranker: Literal["heuristic", "cross-encoder"] = "heuristic"
    context: Annotated[str | None, Field(max_length=5000)] = None
    filters: Annotated[
        Filters | None, Field(description="metadata filters of the searches (as /api/search)")
    ] = None


class BasedOn(BaseModel):
    id: UUID
    text: str
    weight: float
    event_date: datetime | None = None
    context: str | None = None
    confidence: float | None = None


class NewOpinion(BaseModel):
    statement: str
    reasons: list[str]
    confidence: float
    stance: str
    previous_id: UUID | None = None


class ThinkResponse(BaseModel):
    text: str
    based_on: dict[str, list[BasedOn]]
    new_opinions: list[NewOpinion]
    opinions_operation_id: UUID | None = None
    opinion_error: str | None = None


# ------------------------------------------------------------------------- read path
async def _search(
    retriever: Retriever, scope: Scope, body: ThinkRequest, fact_type: str
) -> list[Evidence]:
    params = SearchParams(
        agent_id=body.agent_id,
        scope=scope,
        query=body.query,
        fact_types=(fact_type,),
        thinking_budget=body.thinking_budget,
        top_k=body.top_k,
        reranker=body.reranker,
        filters=body.filters,
    )
    try:
        outcome = await run_in_threadpool(retriever.search, params)
    except RerankerUnavailable as exc:
        raise APIError(503, "reranker_unavailable", str(exc)) from exc
    return [
        Evidence(
            id=hit.id,
            text=hit.text,
            fact_type=hit.fact_type,
            weight=hit.weight,
            event_date=hit.event_date,
            context=hit.context,
        )
        for hit in outcome.hits
    ]


def _profile(pool: Pool, scope: Scope, agent_id: str) -> Profile:
    with pool.tenant_connection(scope.tenant_id) as conn:
        row = agents.get_agent(conn, scope, agent_id)
    if row is None:  # think does not create agents; the defaults apply
        return Profile(agent_id, full_personality(None))
    return Profile(agent_id, full_personality(row["personality"]), row["background"] or "")


def _current_opinions(
    pool: Pool, scope: Scope, agent_id: str, found: list[Evidence]
) -> list[Evidence]:
    """Opinions with their confidence; versions a later one superseded are left out."""
    with pool.tenant_connection(scope.tenant_id) as conn:
        known = opinions.state(conn, scope, agent_id, [e.id for e in found])
    kept = []
    for e in found:
        confidence, superseded = known.get(e.id, (None, False))
        if not superseded:
            kept.append(
                Evidence(e.id, e.text, e.fact_type, e.weight, e.event_date, e.context, confidence)
            )
    return kept


# ------------------------------------------------------------------------- opinions
def _backend(request: Request) -> TaskBackend:
    state = request.app.state
    backend: TaskBackend | None = getattr(state, "backend", None)
    if backend is None:
        backend = CeleryBackend(create_celery(state.settings))
        state.backend = backend
    return backend


def _store_opinions(
    request: Request, scope: Scope, body: ThinkRequest, profile: Profile, result: ThinkResult
) -> UUID:
    pool: Pool = request.app.state.pool
    based_on = [e.id for network in NETWORKS for e in result.based_on.get(network, [])]
    with pool.tenant_connection(scope.tenant_id) as conn:
        op_id = opinions.record(
            conn,
            scope,
            body.agent_id,
            result.new_opinions,
            formed_at=utcnow(),
            query=body.query,
            personality=profile.personality,
            based_on=based_on,
        )
    try:
        _backend(request).enqueue(Stage.OPINIONS, op_id)
    except Exception:  # the operation is durable: the reconciler re-enqueues it
        log.exception("could not enqueue opinions operation %s", op_id)
    return op_id


# ------------------------------------------------------------------------- route
@router.post(
    "/think",
    response_model=ThinkResponse,
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 502, 503),
)
async def think_route(scope: ScopeDep, body: ThinkRequest, request: Request) -> ThinkResponse:
    client = llm_client(request)
    retriever = search_routes.retriever(request)
    pool: Pool = request.app.state.pool
    profile = await run_in_threadpool(_profile, pool, scope, body.agent_id)
    found = await asyncio.gather(
        *(_search(retriever, scope, body, network) for network in NETWORKS)
    )
    based_on: dict[str, list[Evidence]] = dict(zip(NETWORKS, found, strict=True))
    based_on["opinion"] = await run_in_threadpool(
        _current_opinions, pool, scope, body.agent_id, based_on["opinion"]
    )
    try:
        result = await run_in_threadpool(think, client, profile, body.query, based_on, body.context)
    except LLMError as exc:
        raise llm_api_error(exc) from exc
    op_id: UUID | None = None
    if result.new_opinions:
        try:
            op_id = await run_in_threadpool(_store_opinions, request, scope, body, profile, result)
        except Exception as exc:  # the answer still goes back
            log.exception("storing opinions failed")
            result.opinion_error = f"storing opinions failed: {type(exc).__name__}"
    return ThinkResponse(
        text=result.text,
        based_on={
            n: [
                BasedOn(
                    id=e.id,
                    text=e.text,
                    weight=e.weight,
                    event_date=e.event_date,
                    context=e.context,
                    confidence=e.confidence,
                )
                for e in result.based_on.get(n, [])
            ]
            for n in NETWORKS
        },
        new_opinions=[
            NewOpinion(
                **o.model_dump(
                    include={"statement", "reasons", "confidence", "stance", "previous_id"}
                )
            )
            for o in result.new_opinions
        ],
        opinions_operation_id=op_id,
        opinion_error=result.opinion_error,
    )
