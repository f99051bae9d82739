"""Agent simulations (seed 001): seeded characters and scenes, captured dialogue."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import (
    BaseModel,
)


class SeededDocument(BaseModel):
    agent_id: str
    document_id: str
    status: Literal["created", "replaced", "unchanged", "deleted"]
    operation_id: UUID | None
    items: int


class SeedResponse(BaseModel):
    scenario: str
    counts: dict[str, int]
    documents: list[SeededDocument]


class EpisodeMemory(BaseModel):
    agent_id: str
    document_id: str
    status: Literal["created", "replaced", "unchanged"]
    operation_id: UUID


class EpisodeResponse(BaseModel):
    scene: str
    turn: int
    speaker: str
    memories: list[EpisodeMemory]


class EpisodeBatchResponse(BaseModel):
    scene: str
    lines: list[EpisodeResponse]
