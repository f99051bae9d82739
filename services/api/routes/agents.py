"""Agent profiles (seed 000 §4.2, §6.2): personality, background, and the opinion history."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query

from memora.basics.models import AGENT_ID_PATTERN
from memora.usecases import agents
from services.api.deps import ConnDep, ContextDep, Offset, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.agents import (
    AgentDeleted,
    AgentEvolution,
    AgentList,
    AgentProfile,
    AgentUpdate,
    BackgroundRequest,
    BackgroundResponse,
    OpinionHistory,
    OpinionList,
    OpinionVersion,
    PersonalityUpdate,
)

router = APIRouter(prefix="/api", tags=["agents"], responses=error_responses(*AUTH_ERRORS))
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
READ_ERRORS = error_responses(422, 503)
WRITE_ERRORS = error_responses(*BODY_ERRORS, 503)


@router.get("/agents", response_model=AgentList, responses=READ_ERRORS)
def list_agents(
    scope: ScopeDep,
    conn: ConnDep,
    context: ContextDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Offset = 0,
) -> AgentList:
    found = agents.list_profiles(context, conn, scope, limit=limit, offset=offset)
    return AgentList(agents=[AgentProfile.model_validate(p) for p in found])


@router.get("/agents/{agent_id}/profile", response_model=AgentProfile, responses=READ_ERRORS)
def get_profile(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, context: ContextDep
) -> AgentProfile:
    """Creates the agent with the default personality (all 0.5) when it does not exist."""
    return AgentProfile.model_validate(agents.profile(context, conn, scope, agent_id))


@router.put("/agents/{agent_id}", response_model=AgentProfile, responses=WRITE_ERRORS)
def put_agent(
    scope: ScopeDep, agent_id: AgentPath, body: AgentUpdate, conn: ConnDep, context: ContextDep
) -> AgentProfile:
    """Create or update; personality values and limits merge over the current ones (a limit
    set to null: no limit), background replaces."""
    personality = body.personality.values() if body.personality else None
    limits = body.limits.values() if body.limits else None
    updated = agents.update(
        context, conn, scope, agent_id, personality=personality, background=body.background,
        limits=limits,
    )  # fmt: skip
    return AgentProfile.model_validate(updated)


@router.put("/agents/{agent_id}/profile", response_model=AgentProfile, responses=WRITE_ERRORS)
def put_personality(
    scope: ScopeDep,
    agent_id: AgentPath,
    body: PersonalityUpdate,
    conn: ConnDep,
    context: ContextDep,
) -> AgentProfile:
    updated = agents.update(context, conn, scope, agent_id, personality=body.personality.values())
    return AgentProfile.model_validate(updated)


@router.post(
    "/agents/{agent_id}/background",
    response_model=BackgroundResponse,
    responses=error_responses(*BODY_ERRORS, 409, 502, 503),
)
def merge_agent_background(
    scope: ScopeDep, agent_id: AgentPath, body: BackgroundRequest, context: ContextDep
) -> BackgroundResponse:
    """LLM merge (seed 000 §4.4); nothing is written unless the merge succeeds. The merge is
    compare-and-set on the background it read, redone when a concurrent merge got there first."""
    merged = agents.merge_into_background(context, scope, agent_id, body.content)
    return BackgroundResponse(background=merged)


@router.post(
    "/agents/{agent_id}/evolve",
    status_code=202,
    response_model=AgentEvolution,
    responses=error_responses(404, 422, 503),
)
def evolve_agent(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, context: ContextDep
) -> AgentEvolution:
    """Run the agent's memory evolution now (seed 002 §4.5, the end of a session): its
    consolidation (duplicates merged, changed facts superseded) and reflection when its
    trigger is met, as an operation on a worker, instead of at the periodic jobs' next run."""
    operation_id = agents.evolve(context, conn, scope, agent_id)
    return AgentEvolution(agent_id=agent_id, operation_id=operation_id)


@router.get("/agents/{agent_id}/opinions", response_model=OpinionList, responses=READ_ERRORS)
def list_opinions(
    scope: ScopeDep,
    agent_id: AgentPath,
    conn: ConnDep,
    context: ContextDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> OpinionList:
    """The agent's current opinions (latest version of each), newest first."""
    rows = agents.current_opinions(context, conn, scope, agent_id, limit=limit, offset=offset)
    return OpinionList(agent_id=agent_id, opinions=[OpinionVersion.of(r) for r in rows])


@router.get(
    "/agents/{agent_id}/opinions/{opinion_id}/history",
    response_model=OpinionHistory,
    responses=error_responses(404, 422, 503),
)
def opinion_history(
    scope: ScopeDep, agent_id: AgentPath, opinion_id: UUID, conn: ConnDep, context: ContextDep
) -> OpinionHistory:
    """All versions of the opinion, oldest first, whichever version `opinion_id` names."""
    versions = [
        OpinionVersion.of(r)
        for r in agents.opinion_history(context, conn, scope, agent_id, opinion_id)
    ]
    return OpinionHistory(
        agent_id=agent_id, opinion_id=opinion_id, current_id=versions[-1].id, versions=versions
    )


@router.delete("/agents/{agent_id}", response_model=AgentDeleted, responses=READ_ERRORS)
def delete_agent(
    scope: ScopeDep, agent_id: AgentPath, conn: ConnDep, context: ContextDep
) -> AgentDeleted:
    """Hard delete of the agent and everything of it: documents (raw content), memory units,
    links, entities, opinions, operations, access counts, the webhook events about it. The
    answer is a receipt: rows removed per table, and `remaining` 0 after a check of every
    table that holds an agent's data. Deleting it again succeeds with zero counts."""
    return AgentDeleted.of(agent_id, agents.delete(context, conn, scope, agent_id))


@router.delete("/agents", response_model=AgentDeleted, responses=READ_ERRORS)
def delete_all_agents(
    scope: ScopeDep,
    conn: ConnDep,
    context: ContextDep,
    confirm: Annotated[bool, Query(description="must be true: this deletes every agent")],
) -> AgentDeleted:
    """Hard delete of every agent of the caller's tenant and all their data ("delete all my
    data"); the tenant and its API keys stay. Idempotent."""
    return AgentDeleted.of(None, agents.delete_all(context, conn, scope, confirm=confirm))
