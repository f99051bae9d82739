"""The memory graph for the UI (seed 003 `GET /api/graph`) and the agent list."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
)

from memora.basics.models import (
    FactType,
    aware,
)

LinkType = Literal["temporal", "semantic", "entity", "causes", "caused_by", "enables", "prevents"]


NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL


Moment = Annotated[datetime | None, AfterValidator(aware)]


class Node(BaseModel):
    id: UUID
    kind: Literal["unit", "entity"]
    label: str
    fact_type: FactType | None = None
    date: datetime | None = None
    entity_type: str | None = None
    mentions: int | None = None


class Edge(BaseModel):
    source: UUID
    target: UUID
    type: str = Field(
        description="a link type, `mentions` (a unit → an entity it names) or `relation` (an "
        "entity → another: subject → object of `relation`)"
    )
    weight: float
    relation: str | None = Field(
        default=None, description="type `relation`: works_at, lives_in, sibling_of..."
    )


class Graph(BaseModel):
    agent_id: str
    nodes: list[Node]
    edges: list[Edge]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page of seeds")
    truncated: bool = Field(description="nodes or edges were left out to stay within the bounds")


class AgentSize(BaseModel):
    agent_id: str
    memories: int
    entities: int
    documents: int
    failed_operations: int


class AgentSizes(BaseModel):
    agents: list[AgentSize]
