"""The memory lifecycle on the query service (seed 002 §4.4): remember, edit, forget, restore,
recall, reflect and link, the operations that embed or rank. One memory with its history is the
write API's route (`GET /api/agents/{agent_id}/memories/{id}`, services.api.routes.memories). Thin:
the use cases are `memora.usecases`' (`remember`, `memories`, `recall`, `reflect`), whose
refusals become 4xx JSON answers in services.api.errors."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Response
from fastapi.concurrency import run_in_threadpool

from memora.basics.models import AGENT_ID_PATTERN
from memora.usecases import memories
from memora.usecases.recall import recall
from memora.usecases.reflect import reflect
from memora.usecases.remember import remember
from services.api.deps import ContextDep, PrincipalDep, actor_of
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.reads import ReadsDep
from services.api.schemas.lifecycle import (
    EditRequest,
    EditResponse,
    ForgetRequest,
    ForgetResponse,
    LinkRequest,
    RecallRequest,
    ReflectRequest,
    RememberRequest,
    RememberResponse,
)

router = APIRouter(
    prefix="/api/agents/{agent_id}",
    tags=["lifecycle"],
    responses=error_responses(*AUTH_ERRORS, *BODY_ERRORS, 404),
)
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]


@router.post("/remember", response_model=RememberResponse)
async def remember_route(
    principal: PrincipalDep, agent_id: AgentPath, body: RememberRequest, context: ContextDep
) -> RememberResponse:
    """ADD, or SKIP (same text), MERGE (near-duplicate) or SUPERSEDE (a changed attribute)."""
    result = await run_in_threadpool(
        remember, context, principal.scope, agent_id, body.content,
        category=body.category, importance=body.importance, related_to=body.related_to,
        actor=actor_of(principal),
    )  # fmt: skip
    return RememberResponse.of(result)


@router.patch("/memories/{memory_id}", response_model=EditResponse, responses=error_responses(409))
async def edit_route(
    principal: PrincipalDep,
    agent_id: AgentPath,
    memory_id: UUID,
    body: EditRequest,
    context: ContextDep,
) -> EditResponse:
    """Edit an active memory's text: a new version (same fact type, importance, category) that
    supersedes it, holding over its whole window; the old one keeps its history (restorable).
    409 `memory_not_active` for one that is not active; 422 `unchanged` for the same text."""
    new_id = await run_in_threadpool(
        memories.edit, context, principal.scope, agent_id, memory_id, body.content,
        actor=actor_of(principal),
    )  # fmt: skip
    return EditResponse(memory_id=new_id, superseded_id=memory_id)


@router.post("/forget", response_model=ForgetResponse, responses=error_responses(409))
async def forget_route(
    principal: PrincipalDep, agent_id: AgentPath, body: ForgetRequest, context: ContextDep
) -> ForgetResponse:
    """Soft delete by id or by query (dry_run lists what would go; a cap guards the query)."""
    result = await run_in_threadpool(
        memories.forget, context, principal.scope, agent_id, memory_id=body.memory_id,
        query=body.query, reason=body.reason, dry_run=body.dry_run, confirm=body.confirm,
        actor=actor_of(principal),
    )  # fmt: skip
    return ForgetResponse(
        dry_run=result.dry_run,
        forgotten=result.forgotten,
        restorable_for_days=context.settings.forget_retention_days,
    )


@router.post("/memories/{memory_id}/restore", responses=error_responses(410))
async def restore_route(
    principal: PrincipalDep, agent_id: AgentPath, memory_id: UUID, context: ContextDep
) -> dict[str, Any]:
    """A forgotten or an archived memory (each within its retention), a superseded one:
    active."""
    return await run_in_threadpool(
        memories.restore, context, principal.scope, agent_id, memory_id, actor=actor_of(principal)
    )


@router.post("/recall")
async def recall_route(
    principal: PrincipalDep,
    agent_id: AgentPath,
    body: RecallRequest,
    reads: ReadsDep,
    response: Response,
) -> dict[str, Any]:
    """Fused retrieval reranked by relevance, recency, importance and frequency."""
    query, scope = body.to_query(), principal.scope
    found = await reads.run(
        response,
        scope,
        body.after_operation,
        lambda side: recall(side.context, side.retriever, scope, agent_id, query),
    )
    return {"agent_id": agent_id, "memories": found}


@router.post("/reflect", responses=error_responses(502, 503))
async def reflect_route(
    principal: PrincipalDep, agent_id: AgentPath, body: ReflectRequest, context: ContextDep
) -> dict[str, Any]:
    """Insights from related memories, stored as reflections linked to them (needs the LLM)."""
    made = await run_in_threadpool(
        reflect, context, principal.scope, agent_id, topic=body.topic, depth=body.depth,
        actor=actor_of(principal),
    )  # fmt: skip
    return {
        "agent_id": agent_id,
        "reflections": [
            {"id": r.id, "text": r.text, "importance": r.importance, "sources": r.sources}
            for r in made
        ],
    }


@router.post("/link")
async def link_route(
    principal: PrincipalDep, agent_id: AgentPath, body: LinkRequest, context: ContextDep
) -> dict[str, Any]:
    """A typed link, both ways, that graph retrieval follows (link type `explicit`)."""
    return await run_in_threadpool(
        memories.link, context, principal.scope, agent_id, body.memory_id,
        body.related_memory_id, body.relationship, weight=body.weight, actor=actor_of(principal),
    )  # fmt: skip
