"""The request bodies, field for field the API's (services/api/schemas)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from memora_client.models.base import Request, Reranker, Role, SearchableType


class MemoryItem(Request):
    """One piece of raw content: a message, a turn, or a whole transcript."""

    content: str
    context: str | None = None
    event_date: datetime | None = None
    speaker: str | None = None
    metadata: dict[str, str | int | float | bool | list[str] | None] = Field(default_factory=dict)
    message_id: str | None = Field(
        default=None, description="unique within its document; default: its position"
    )
    role: Role | None = None
    remember: bool | None = Field(default=None, description="false: no memory from it")
    searchable: bool | None = Field(
        default=None, description="false: not in the conversation index; default: as remember"
    )
    channel: str | None = Field(default=None, description="where it was said: web, teams...")


class Message(MemoryItem):
    """A message of a live conversation: `message_id` and `role` are required."""

    message_id: str
    role: Role


class BatchRequest(Request):
    agent_id: str
    items: list[MemoryItem]
    document_id: str | None = None
    title: str | None = None
    update_mode: Literal["replace", "append"] = "replace"
    temporary: bool = False
    channel: str | None = None  # for the items that name none


class AppendRequest(Request):
    messages: list[Message]
    temporary: bool = False
    title: str | None = None
    end_of_conversation: bool = False
    channel: str | None = None  # for the messages that name none


class SearchRequest(Request):
    agent_id: str
    query: str
    thinking_budget: int = 100
    top_k: int = 10
    reranker: Reranker = "heuristic"
    trace: bool = False
    max_tokens: int | None = None
    reference_time: datetime | None = None
    filters: dict[str, Any] | None = None
    as_of: datetime | None = None
    after_operation: UUID | None = None
    fact_type: list[SearchableType] | None = None
    channel: str | list[str] | None = None
    follow_up: bool | None = None  # None: not sent (a server before it refuses the field)


class ThinkRequest(Request):
    agent_id: str
    query: str
    thinking_budget: int = 50
    top_k: int = 10
    reranker: Reranker = "heuristic"
    context: str | None = None
    filters: dict[str, Any] | None = None
    as_of: datetime | None = None
    include_reflections: bool | None = None  # None: the API's default (true)
    follow_up: bool | None = None  # None: not sent (the API's default, false)


class TimeRange(Request):
    start: datetime | None = None
    end: datetime | None = None


class ConversationSearchRequest(Request):
    agent_id: str
    query: str
    limit: int = 5
    document_id: str | None = None
    time_range: TimeRange | None = None
    roles: list[Role] | None = None
    channel: str | list[str] | None = None
    min_score: float | None = None
    highlight: bool | None = None
    after_operation: UUID | None = None


class RememberRequest(Request):
    content: str
    category: str | None = None
    importance: float | None = None
    related_to: list[UUID] = Field(default_factory=list)


class EditRequest(Request):
    content: str


class ForgetRequest(Request):
    memory_id: UUID | None = None
    query: str | None = None
    reason: str | None = None
    dry_run: bool = False
    confirm: bool = False


class RecallRequest(Request):
    query: str
    limit: int = 10
    time_range: TimeRange | None = None
    categories: list[str] | None = None
    include_reflections: bool = True
    as_of: datetime | None = None
    after_operation: UUID | None = None


class ReflectRequest(Request):
    topic: str | None = None
    depth: Literal["shallow", "deep"] = "shallow"


class LinkRequest(Request):
    memory_id: UUID
    related_memory_id: UUID
    relationship: str = "related_to"
    weight: float = 1.0


class Personality(Request):
    """Big Five traits and bias strength, each in [0, 1]; omitted ones keep their value."""

    openness: float | None = None
    conscientiousness: float | None = None
    extraversion: float | None = None
    agreeableness: float | None = None
    neuroticism: float | None = None
    bias_strength: float | None = None


class AgentUpdate(Request):
    personality: Personality | None = None
    background: str | None = None
    # max_memories, max_reflections, max_graph_nodes, archive_retention_days; null: no limit
    limits: dict[str, int | float | None] | None = None


class EpisodeLine(Request):
    """One line of a scene (seed 001): who said it, when in the scene, and what."""

    turn: int
    speaker: str
    text: str
    event_date: datetime | None = None


class EpisodeRequest(EpisodeLine):
    """One line and the agents who heard it (`POST /api/episodes`)."""

    scene: str
    listeners: list[str]


class EpisodeBatchRequest(Request):
    """Several lines of one scene heard by the same agents (`POST /api/episodes/batch`)."""

    scene: str
    listeners: list[str]
    lines: list[EpisodeLine]
