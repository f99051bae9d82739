"""The memory lifecycle on the query service (seed 002 §4.4): remember, forget, restore, recall,
reflect, link, and one memory with its history and links. Thin: memora.lifecycle does the work
(its errors become 4xx JSON answers in services.api.errors)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memora.basics.models import AGENT_ID_PATTERN, StorableText, aware
from memora.lifecycle.memory import Memories
from memora.lifecycle.recall import RecallQuery, recall
from memora.lifecycle.reflect import reflect
from memora.nlp.llm import LLMClient, LLMError
from services.api.deps import PrincipalDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses
from services.api.llm import llm_api_error
from services.api.routes.search import retriever

router = APIRouter(
    prefix="/api/agents/{agent_id}",
    tags=["lifecycle"],
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 404),
)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
Category = Annotated[StorableText, Field(min_length=1, max_length=100)]


def memories(request: Request) -> Memories:
    """The app's lifecycle operations (made on first use, with the LLM when one is set)."""
    state = request.app.state
    found: Memories | None = getattr(state, "memories", None)
    if found is None:
        s = state.settings
        found = Memories(s, state.pool, state.embedder, LLMClient(s) if s.llm_configured else None)
        state.memories = found
    return found


def _actor(principal: Any) -> str:
    return f"api:{principal.key_id}" if principal.key_id else "api"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------ remember
class RememberRequest(Strict):
    content: Annotated[StorableText, Field(min_length=1)]
    category: Category | None = None
    importance: Annotated[float | None, Field(ge=1, le=10)] = None
    related_to: Annotated[list[UUID], Field(max_length=100)] = Field(default_factory=list)


class RememberResponse(BaseModel):
    decision: Literal["ADD", "SKIP", "MERGE", "SUPERSEDE"]
    memory_id: UUID
    reason: str
    decided_by: str
    superseded_id: UUID | None = None
    merged_into: UUID | None = None
    linked: list[UUID] = Field(default_factory=list)


@router.post("/remember", response_model=RememberResponse)
async def remember_route(
    principal: PrincipalDep, agent_id: AgentPath, body: RememberRequest, request: Request
) -> RememberResponse:
    """ADD, or SKIP (same text), MERGE (near-duplicate) or SUPERSEDE (a changed attribute)."""
    result = await run_in_threadpool(
        memories(request).remember, principal.scope, agent_id, body.content,
        category=body.category, importance=body.importance, related_to=body.related_to,
        actor=_actor(principal),
    )  # fmt: skip
    return RememberResponse(
        decision=result.decision.value,
        memory_id=result.memory_id,
        reason=result.reason,
        decided_by=result.decided_by,
        superseded_id=result.superseded_id,
        merged_into=result.merged_into,
        linked=result.linked,
    )


# -------------------------------------------------------------------------------- forget
class ForgetRequest(Strict):
    memory_id: UUID | None = None
    query: Annotated[StorableText | None, Field(min_length=1, max_length=2000)] = None
    reason: Annotated[StorableText | None, Field(max_length=1000)] = None
    dry_run: bool = False
    confirm: bool = False  # needed to forget more than MEMORA_FORGET_QUERY_CAP by query


class ForgetResponse(BaseModel):
    dry_run: bool
    forgotten: list[dict[str, Any]]
    restorable_for_days: float


@router.post("/forget", response_model=ForgetResponse, responses=error_responses(409))
async def forget_route(
    principal: PrincipalDep, agent_id: AgentPath, body: ForgetRequest, request: Request
) -> ForgetResponse:
    """Soft delete by id or by query (dry_run lists what would go; a cap guards the query)."""
    m = memories(request)
    result = await run_in_threadpool(
        m.forget, principal.scope, agent_id, memory_id=body.memory_id, query=body.query,
        reason=body.reason, dry_run=body.dry_run, confirm=body.confirm, actor=_actor(principal),
    )  # fmt: skip
    return ForgetResponse(
        dry_run=result.dry_run,
        forgotten=result.forgotten,
        restorable_for_days=m.settings.forget_retention_days,
    )


@router.post("/memories/{memory_id}/restore", responses=error_responses(410))
async def restore_route(
    principal: PrincipalDep, agent_id: AgentPath, memory_id: UUID, request: Request
) -> dict[str, Any]:
    """A forgotten memory (within the retention), an archived or a superseded one: active."""
    return await run_in_threadpool(
        memories(request).restore, principal.scope, agent_id, memory_id, actor=_actor(principal)
    )


@router.get("/memories/{memory_id}")
async def get_memory_route(
    principal: PrincipalDep, agent_id: AgentPath, memory_id: UUID, request: Request
) -> dict[str, Any]:
    """The memory in any status, its history (every change, oldest first), links and the
    memories it replaced."""
    return await run_in_threadpool(memories(request).get, principal.scope, agent_id, memory_id)


# -------------------------------------------------------------------------------- recall
class TimeRange(Strict):
    """When the memories were said: start ≤ event date < end (naive times are UTC)."""

    start: Annotated[datetime | None, AfterValidator(aware)] = None
    end: Annotated[datetime | None, AfterValidator(aware)] = None


class RecallRequest(Strict):
    query: Annotated[StorableText, Field(min_length=1, max_length=2000)]
    limit: Annotated[int, Field(ge=1, le=100)] = 10
    time_range: TimeRange | None = None
    categories: Annotated[list[Category] | None, Field(min_length=1, max_length=50)] = None
    include_reflections: bool = True


@router.post("/recall")
async def recall_route(
    principal: PrincipalDep, agent_id: AgentPath, body: RecallRequest, request: Request
) -> dict[str, Any]:
    """Fused retrieval reranked by relevance, recency, importance and frequency."""
    tr = body.time_range or TimeRange()
    query = RecallQuery(
        body.query,
        body.limit,
        tr.start,
        tr.end,
        tuple(body.categories) if body.categories else None,
        body.include_reflections,
    )
    found = await run_in_threadpool(recall, retriever(request), principal.scope, agent_id, query)
    return {"agent_id": agent_id, "memories": found}


# ------------------------------------------------------------------------------- reflect
class ReflectRequest(Strict):
    topic: Annotated[StorableText | None, Field(min_length=1, max_length=500)] = None
    depth: Literal["shallow", "deep"] = "shallow"


@router.post("/reflect", responses=error_responses(502, 503))
async def reflect_route(
    principal: PrincipalDep, agent_id: AgentPath, body: ReflectRequest, request: Request
) -> dict[str, Any]:
    """Insights from related memories, stored as reflections linked to them (needs the LLM)."""
    try:
        made = await run_in_threadpool(
            reflect, memories(request), principal.scope, agent_id, topic=body.topic,
            depth=body.depth, actor=_actor(principal),
        )  # fmt: skip
    except LLMError as exc:
        raise llm_api_error(exc) from exc
    return {
        "agent_id": agent_id,
        "reflections": [
            {"id": r.id, "text": r.text, "importance": r.importance, "sources": r.sources}
            for r in made
        ],
    }


# ---------------------------------------------------------------------------------- link
class LinkRequest(Strict):
    memory_id: UUID
    related_memory_id: UUID
    relationship: Annotated[StorableText, Field(min_length=1, max_length=100)] = "related_to"
    weight: Annotated[float, Field(gt=0, le=1)] = 1.0


@router.post("/link")
async def link_route(
    principal: PrincipalDep, agent_id: AgentPath, body: LinkRequest, request: Request
) -> dict[str, Any]:
    """A typed link, both ways, that graph retrieval follows (link type `explicit`)."""
    if body.memory_id == body.related_memory_id:
        raise APIError(422, "bad_request", "a memory cannot be linked to itself")
    return await run_in_threadpool(
        memories(request).link, principal.scope, agent_id, body.memory_id,
        body.related_memory_id, body.relationship, weight=body.weight, actor=_actor(principal),
    )  # fmt: skip
