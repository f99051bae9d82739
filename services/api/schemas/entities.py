"""One entity with its relations (`GET /api/agents/{agent_id}/entities/{name}`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

RelationName = Literal[
    "works_at", "lives_in", "studies_at", "member_of", "manages", "parent_of", "sibling_of",
    "partner_of", "friend_of", "colleague_of",
]  # fmt: skip


class EntityRef(BaseModel):
    id: UUID
    name: str
    entity_type: str | None = None


class EntityRelation(BaseModel):
    id: UUID
    relation: RelationName = Field(
        description="subject → object: manages (the manager is the subject), parent_of (the "
        "parent is the subject); sibling_of, partner_of, friend_of, colleague_of are symmetric"
    )
    direction: Literal["outgoing", "incoming"] = Field(
        description="outgoing: this entity is the subject"
    )
    subject: EntityRef
    object: EntityRef
    other: EntityRef = Field(description="the entity at the other end")
    evidence: list[UUID] = Field(description="the memories that state it, oldest first")
    valid_from: datetime
    valid_until: datetime | None = Field(description="null while it holds")
    superseded_by: UUID | None = Field(description="the relation that replaced it")
    ended_by: UUID | None = Field(description="the memory that ended it")
    status: Literal["current", "superseded", "ended"]
    source: Literal["parse", "llm"]


class Entity(BaseModel):
    agent_id: str
    id: UUID
    canonical_name: str
    entity_type: str
    aliases: list[str]
    mention_count: int
    first_seen: datetime
    last_seen: datetime
    traits: dict[str, int] = Field(
        default_factory=dict,
        description="what memories said of who or what it is, counted (male, female, animal, "
        "human): entity resolution keeps apart two of one name whose evidence contradicts",
    )
    relations: list[EntityRelation] = Field(description="current first, then the newest")
