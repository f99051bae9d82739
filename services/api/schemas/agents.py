"""Agent profiles (seed 000 §4.2, §6.2): personality, background, opinions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
)

from memora.usecases.agents import Erasure, Opinion

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


class Limits(BaseModel):
    """The agent's own limits (seed 002 §4.9; docs/lifecycle.md "Limits"); a key left out keeps
    its current value (at first: the MEMORA_* default), null means no limit."""

    model_config = ConfigDict(extra="forbid")

    max_memories: int | None = Field(default=None, ge=0, le=100_000_000)
    max_reflections: int | None = Field(default=None, ge=0, le=100_000_000)
    max_graph_nodes: int | None = Field(default=None, ge=0, le=100_000_000)
    archive_retention_days: float | None = Field(default=None, gt=0, le=36_500, allow_inf_nan=False)

    def values(self) -> dict[str, Any]:
        return self.model_dump(include=self.model_fields_set)


class AgentUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    personality: Personality | None = None
    background: str | None = Field(default=None, max_length=MAX_BACKGROUND_CHARS)
    limits: Limits | None = None


class PersonalityUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    personality: Personality


class BackgroundRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: Annotated[str, Field(max_length=MAX_BACKGROUND_CHARS), AfterValidator(_not_blank)]


class BackgroundResponse(BaseModel):
    background: str


class AgentProfile(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    agent_id: str
    personality: dict[str, float]
    background: str
    limits: dict[str, int | float | None] = Field(
        description="the limits this agent set; a key absent follows the MEMORA_* default"
    )
    created_at: datetime
    updated_at: datetime


class AgentList(BaseModel):
    agents: list[AgentProfile]


class ErasureReceipt(BaseModel):
    """What a hard delete removed, and what a check of every table holding an agent's data
    found of it afterwards, in the same transaction."""

    success: bool
    deleted: dict[str, int] = Field(description="rows removed, per table")
    remaining: int = Field(
        description="rows still holding a deleted agent's key, over every table in `checked`: 0"
    )
    remaining_by_table: dict[str, int] = Field(default_factory=dict)
    checked: list[str] = Field(description="the tables checked (every one with an agent_id)")

    @staticmethod
    def fields_of(erasure: Erasure) -> dict[str, Any]:
        return {
            "success": True,
            "deleted": erasure.deleted,
            "remaining": erasure.left.total,
            "remaining_by_table": erasure.left.rows,
            "checked": erasure.left.checked,
        }


class AgentDeleted(ErasureReceipt):
    agent_id: str | None = Field(description="null when every agent of the tenant was deleted")

    @classmethod
    def of(cls, agent_id: str | None, erasure: Erasure) -> AgentDeleted:
        return cls(agent_id=agent_id, **cls.fields_of(erasure))


class AgentEvolution(BaseModel):
    agent_id: str
    operation_id: UUID = Field(
        description="the `evolve` operation: GET /api/operations/{id}; its counts say what changed"
    )


class OpinionVersion(BaseModel):
    id: UUID
    text: str
    statement: str | None = None
    reasons: list[str] = Field(default_factory=list)
    confidence: float | None
    stance: str | None = None
    formed_at: datetime
    supersedes: UUID | None

    @classmethod
    def of(cls, row: Opinion) -> OpinionVersion:
        meta = row.metadata or {}
        return cls(
            id=row.id,
            text=row.text,
            statement=meta.get("statement"),
            reasons=meta.get("reasons") or [],
            confidence=row.confidence,
            stance=meta.get("stance"),
            formed_at=row.event_date,
            supersedes=row.supersedes,
        )


class OpinionList(BaseModel):
    agent_id: str
    opinions: list[OpinionVersion]


class OpinionHistory(BaseModel):
    agent_id: str
    opinion_id: UUID
    current_id: UUID
    versions: list[OpinionVersion]
