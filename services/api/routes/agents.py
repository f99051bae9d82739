"""Agent profiles (seed 000 §4.2, §6.2): personality, background, and the opinion history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memora.basics.models import AGENT_ID_PATTERN
from memora.db.pool import Pool
from memora.nlp.llm import LLMError
from memora.store import agents
from memora.think import opinions
from memora.think.personality import full_personality, merge_background
from services.api.deps import ConnDep, Offset, ScopeDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses
from services.api.llm import llm_api_error, llm_client

router = APIRouter(prefix="/api", tags=["agents"], responses=error_responses(*AUTH_ERRORS))
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
Trait = Annotated[float | None, Field(default=None, ge=0, le=1, allow_inf_nan=False)]
MAX_BACKGROUND_CHARS = 2000


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or whitespace")
    return value


class Personality(BaseModel):
    """Big Five traits and bias strength, each in [0, 1]; omitted ones keep their value."""

    model_config = ConfigDict(extra="forbid")

    openness: Trait = None
    conscientiousness: Trait = None
    extraversion: Trait = None
    agreeableness: Trait = None
    neuroticism: Trait = None
    bias_strength: Trait = None

    def values(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class AgentUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    personality: Personality | None = None
    background: str | None = Field(default=None, max_length=MAX_BACKGROUND_CHARS)


class PersonalityUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    personality: Personality


class BackgroundRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: Annotated[str, Field(max_length=MAX_BACKGROUND_CHARS), AfterValidator(_not_blank)]


class BackgroundResponse(BaseModel):
    background: str


class AgentProfile(BaseModel):
    agent_id: str
    personality: dict[str, float]
    background: str
    created_at: datetime
    updated_at: datetime


class AgentList(BaseModel):
    agents: list[AgentProfile]


class AgentDeleted(BaseModel):
    success: bool
    agent_id: str | None = Field(description="null when every agent of the tenant was deleted")
    deleted: dict[str, int] = Field(description="rows removed, per table")


class OpinionVersion(BaseModel):
    id: UUID
    text: str
    statement: str | None = None
    reasons: list[str] = Field(default_factory=list)
    confidence: float | None
    stance: str | None = None
    formed_at: datetime
    supersedes: UUID | None


class OpinionList(BaseModel):
    agent_id: str
    opinions: list[OpinionVersion]


class OpinionHistory(BaseModel):
    agent_id: str
    opinion_id: UUID
    current_id: UUID
    versions: list[OpinionVersion]


def _profile(row: dict[str, Any]) -> AgentProfile:
    return AgentProfile(
        agent_id=row["agent_id"],
        personality=full_personality(row["personality"]),
        background=row["background"] or "",
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _version(row: dict[str, Any]) -> OpinionVersion:
    meta = row["metadata"] or {}
    return OpinionVersion(
        id=row["id"],
        text=row["text"],
        statement=meta.get("statement"),
        reasons=meta.get("reasons") or [],
        confidence=row["confidence"],
        stance=meta.get("stance"),
        formed_at=row["event_date"],
        supersedes=row["supersedes"],
    )


@router.get("/agents", response_model=AgentList, responses=error_responses(422, 503))
def list_agents(
    scope: ScopeDep,
    conn: ConnDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Offset = 0,
) -> AgentList:
    return AgentList(
        agents=[_profile(r) for r in agents.list_agents(conn, scope, limit=limit, offset=offset)]
    )


@router.get(
    "/agents/{agent_id}/profile", response_model=AgentProfile, responses=error_responses(422, 503)
)
def get_profile(scope: ScopeDep, agent_id: AgentPath, conn: ConnDep) -> AgentProfile:
    """Creates the agent with the default personality (all 0.5) when it does not exist."""
    with conn.transaction():
        row = agents.get_or_create_agent(conn, scope, agent_id)
    return _profile(row)


@router.put(
    "/agents/{agent_id}", response_model=AgentProfile, responses=error_responses(*BODY_ERRORS, 503)
)
def put_agent(
    scope: ScopeDep, agent_id: AgentPath, body: AgentUpdate, conn: ConnDep
) -> AgentProfile:
    """Create or update; personality values merge over the current ones, background replaces."""
    with conn.transaction():
        row = agents.update_agent(
            conn,
            scope,
            agent_id,
            personality=body.personality.values() if body.personality else None,
            background=body.background,
        )
    return _profile(row)


@router.put(
    "/agents/{agent_id}/profile",
    response_model=AgentProfile,
    responses=error_responses(*BODY_ERRORS, 503),
)
def put_personality(
    scope: ScopeDep, agent_id: AgentPath, body: PersonalityUpdate, conn: ConnDep
) -> AgentProfile:
    with conn.transaction():
        row = agents.update_agent(conn, scope, agent_id, personality=body.personality.values())
    return _profile(row)


@router.post(
    "/agents/{agent_id}/background",
    response_model=BackgroundResponse,
    responses=error_responses(*BODY_ERRORS, 409, 502, 503),
)
def merge_agent_background(
    scope: ScopeDep, agent_id: AgentPath, body: BackgroundRequest, request: Request
) -> BackgroundResponse:
    """LLM merge (seed 000 §4.4); nothing is written unless the merge succeeds. The merge is
    compare-and-set on the background it read, redone when a concurrent merge got there first."""
    client = llm_client(request)
    pool: Pool = request.app.state.pool
    for _ in range(3):
        with pool.tenant_connection(scope.tenant_id) as conn:
            row = agents.get_agent(conn, scope, agent_id)
        current = row["background"] if row else ""
        try:
            merged = merge_background(client, current, body.content)
        except LLMError as exc:
            raise llm_api_error(exc) from exc
        with pool.tenant_connection(scope.tenant_id) as conn:
            agents.ensure_agent(conn, scope, agent_id)
            if agents.replace_background(conn, scope, agent_id, current, merged):
                return BackgroundResponse(background=merged)
    raise APIError(409, "conflict", "the background kept changing during the merge; retry")


@router.get(
    "/agents/{agent_id}/opinions", response_model=OpinionList, responses=error_responses(422, 503)
)
def list_opinions(
    scope: ScopeDep,
    agent_id: AgentPath,
    conn: ConnDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
) -> OpinionList:
    """The agent's current opinions (latest version of each), newest first."""
    rows = opinions.current(conn, scope, agent_id, limit=limit, offset=offset)
    return OpinionList(agent_id=agent_id, opinions=[_version(r) for r in rows])


@router.get(
    "/agents/{agent_id}/opinions/{opinion_id}/history",
    response_model=OpinionHistory,
    responses=error_responses(404, 422, 503),
)
def opinion_history(
    scope: ScopeDep, agent_id: AgentPath, opinion_id: UUID, conn: ConnDep
) -> OpinionHistory:
    """All versions of the opinion, oldest first, whichever version `opinion_id` names."""
    rows = opinions.history(conn, scope, agent_id, opinion_id)
    if not rows:
        raise APIError(404, "not_found", f"opinion {opinion_id} not found for agent {agent_id}")
    versions = [_version(r) for r in rows]
    return OpinionHistory(
        agent_id=agent_id, opinion_id=opinion_id, current_id=versions[-1].id, versions=versions
    )


@router.delete(
    "/agents/{agent_id}", response_model=AgentDeleted, responses=error_responses(422, 503)
)
def delete_agent(scope: ScopeDep, agent_id: AgentPath, conn: ConnDep) -> AgentDeleted:
    """Hard delete of the agent and everything of it: documents (raw content), memory units,
    links, entities, opinions, operations, access counts. Deleting it again succeeds with zero
    counts."""
    with conn.transaction():
        deleted = agents.delete_agent(conn, scope, agent_id)
    return AgentDeleted(success=True, agent_id=agent_id, deleted=deleted)


@router.delete("/agents", response_model=AgentDeleted, responses=error_responses(422, 503))
def delete_all_agents(
    scope: ScopeDep,
    conn: ConnDep,
    confirm: Annotated[bool, Query(description="must be true: this deletes every agent")],
) -> AgentDeleted:
    """Hard delete of every agent of the caller's tenant and all their data ("delete all my
    data"); the tenant and its API keys stay. Idempotent."""
    if not confirm:
        raise APIError(422, "confirmation_required", "pass confirm=true to delete every agent")
    with conn.transaction():
        deleted = agents.delete_all_agents(conn, scope)
    return AgentDeleted(success=True, agent_id=None, deleted=deleted)
