"""The answers, field for field the API's (services/api/schemas)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from memora_client.models.base import TERMINAL_STATUSES, OperationStatus, Response, SearchableType


class BatchAccepted(Response):
    """`POST /api/memories/batch`: the items are durable; extraction runs as `operation_id`."""

    success: bool
    message: str
    agent_id: str
    document_id: str
    items_count: int
    operation_id: UUID
    status: Literal["created", "unchanged", "replaced", "appended"]
    messages_new: int | None = None
    messages_existing: int | None = None


class AppendAccepted(Response):
    """`POST /api/agents/{agent_id}/conversations/{conversation_id}/messages` (202)."""

    success: bool
    agent_id: str
    conversation_id: str
    operation_id: UUID
    status: Literal["created", "appended", "unchanged"]
    messages_new: int
    messages_existing: int


class StageStatus(Response):
    status: str
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    retries: int = 0
    last_error: str | None = None


class Operation(Response):
    """An operation and its stages (`GET /api/operations/{id}`)."""

    id: UUID
    agent_id: str
    kind: str
    document_id: str | None
    status: OperationStatus
    stage: str | None
    stages: dict[str, StageStatus]
    counts: dict[str, int]
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        """completed, failed or superseded."""
        return self.status in TERMINAL_STATUSES


class OperationList(Response):
    operations: list[Operation]
    next_cursor: str | None = None


class SearchResult(Response):
    id: UUID
    text: str
    context: str | None = None
    event_date: datetime | None = None
    weight: float
    fact_type: SearchableType
    metadata: dict[str, Any] | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None


class FollowUpError(Response):
    code: str
    message: str


class FollowUp(Response):
    queries: list[str]
    usage: LLMUsage
    error: FollowUpError | None = None


class SearchResponse(Response):
    results: list[SearchResult]
    trace: dict[str, Any] | None = None
    follow_up: FollowUp | None = None


class BasedOn(Response):
    id: UUID
    text: str
    weight: float
    event_date: datetime | None = None
    context: str | None = None
    confidence: float | None = None


class NewOpinion(Response):
    statement: str
    reasons: list[str]
    confidence: float
    stance: str
    previous_id: UUID | None = None


class LLMUsage(Response):
    """The LLM calls an answer made (retries included) and the tokens the provider counted."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ThinkResponse(Response):
    text: str
    based_on: dict[str, list[BasedOn]]
    new_opinions: list[NewOpinion]
    opinions_operation_id: UUID | None = None
    opinion_error: str | None = None
    usage: LLMUsage = Field(default_factory=LLMUsage)


class ConversationResult(Response):
    rank: int
    score: float
    conversation_id: str
    conversation_title: str | None
    message_id: str
    message_ids: list[str]
    role: str | None
    speaker: str | None
    channel: str | None = None
    timestamp: datetime
    snippet: str
    vector_score: float
    keyword_score: float
    highlights: list[tuple[int, int]] | None = None  # with highlight: offsets in snippet
    snippet_highlighted: str | None = None  # with highlight: matched words in **bold**


class ConversationSearchResponse(Response):
    query: str
    total_results: int
    results: list[ConversationResult]


class RememberResponse(Response):
    decision: Literal["ADD", "SKIP", "MERGE", "SUPERSEDE"]
    memory_id: UUID
    reason: str
    decided_by: str
    superseded_id: UUID | None = None
    merged_into: UUID | None = None
    linked: list[UUID] = Field(default_factory=list)


class EditResponse(Response):
    memory_id: UUID  # the new version
    superseded_id: UUID  # the edited memory, now superseded


class ForgetResponse(Response):
    dry_run: bool
    forgotten: list[dict[str, Any]]
    restorable_for_days: float


class RecalledMemory(Response):
    id: UUID
    text: str
    score: float
    fact_type: str
    category: str | None = None
    importance: float | None = None
    access_count: int | None = None
    last_accessed_at: datetime | None = None
    event_date: datetime | None = None
    metadata: dict[str, Any] | None = None


class RecallResponse(Response):
    agent_id: str
    memories: list[RecalledMemory]


class Reflection(Response):
    id: UUID
    text: str
    importance: float
    sources: list[UUID]


class ReflectResponse(Response):
    agent_id: str
    reflections: list[Reflection]


class LinkResponse(Response):
    memory_id: UUID
    related_memory_id: UUID
    relationship: str
    weight: float


class DocumentSummary(Response):
    document_id: str
    item_count: int
    unit_count: int
    operation_id: UUID | None
    status: str | None
    created_at: datetime
    updated_at: datetime
    trashed_at: datetime | None = None  # in the trash since then (None: live)
    purge_after: datetime | None = None  # in the trash: deleted for real then


class DocumentDetail(DocumentSummary):
    agent_id: str
    items: list[dict[str, Any]]


class DocumentList(Response):
    agent_id: str
    documents: list[DocumentSummary]


class DocumentDeleted(Response):
    success: bool
    agent_id: str
    document_id: str
    deleted: dict[str, Any]
    # a soft delete's: "trashed" (or "absent": no such document), and the trash's dates
    state: Literal["trashed", "absent"] | None = None
    trashed_at: datetime | None = None
    purge_after: datetime | None = None


class DocumentRestored(Response):
    success: bool
    agent_id: str
    document_id: str
    state: Literal["active"]
    restored: dict[str, Any]


class AgentProfile(Response):
    agent_id: str
    personality: dict[str, float]
    background: str
    limits: dict[str, int | float | None] = Field(default_factory=dict)  # those the agent set
    created_at: datetime
    updated_at: datetime


class AgentList(Response):
    agents: list[AgentProfile]


class AgentDeleted(Response):
    """The erasure's receipt: `remaining` 0 after a check of every table in `checked`."""

    success: bool
    agent_id: str | None
    deleted: dict[str, int]
    remaining: int
    remaining_by_table: dict[str, int] = Field(default_factory=dict)
    checked: list[str]


class AgentEvolution(Response):
    agent_id: str
    operation_id: UUID  # the `evolve` operation (wait_for it: its counts say what changed)


class ImportResult(Response):
    agents: list[str]
    imported: dict[str, int]  # rows written, per record type
    unchanged: dict[str, int]  # rows the server already held, per record type


class OpinionVersion(Response):
    id: UUID
    text: str
    statement: str | None = None
    reasons: list[str] = Field(default_factory=list)
    confidence: float | None
    stance: str | None = None
    formed_at: datetime
    supersedes: UUID | None


class OpinionList(Response):
    agent_id: str
    opinions: list[OpinionVersion]


class OpinionHistory(Response):
    agent_id: str
    opinion_id: UUID
    current_id: UUID
    versions: list[OpinionVersion]


class Memory(Response):
    """One memory in full, in any status (`GET /api/agents/{agent_id}/memories/{id}`)."""

    id: UUID
    agent_id: str
    text: str
    context: str | None
    fact_type: str
    category: str | None
    importance: float
    event_date: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime
    created_at: datetime
    confidence_score: float | None
    metadata: dict[str, Any]
    status: Literal["active", "superseded", "forgotten", "archived", "trashed"]
    status_at: datetime | None
    status_reason: str | None
    superseded_by: UUID | None
    supersedes: UUID | None
    valid_from: datetime
    valid_until: datetime | None
    evidence_count: int
    embedded: bool
    document_id: str | None
    item_index: int
    access_count: int
    last_accessed_at: datetime | None
    entities: list[dict[str, Any]]
    links: list[dict[str, Any]]
    history: list[dict[str, Any]]
    replaced: list[UUID]


class EntityRef(Response):
    id: UUID
    name: str
    entity_type: str | None = None


class EntityRelation(Response):
    """A relation between two entities: `relation` reads subject → object."""

    id: UUID
    relation: str
    direction: Literal["outgoing", "incoming"]
    subject: EntityRef
    object: EntityRef
    other: EntityRef
    evidence: list[UUID]
    valid_from: datetime
    valid_until: datetime | None
    superseded_by: UUID | None
    ended_by: UUID | None
    status: Literal["current", "superseded", "ended"]
    source: Literal["parse", "llm"]


class Entity(Response):
    """One entity with its relations (`GET /api/agents/{agent_id}/entities/{name}`)."""

    agent_id: str
    id: UUID
    canonical_name: str
    entity_type: str
    aliases: list[str]
    mention_count: int
    first_seen: datetime
    last_seen: datetime
    traits: dict[str, int] = Field(default_factory=dict)  # said of it: male, female, animal...
    relations: list[EntityRelation]


class SeededDocument(Response):
    agent_id: str
    document_id: str
    status: Literal["created", "replaced", "unchanged", "deleted"]
    operation_id: UUID | None
    items: int


class SeedResponse(Response):
    scenario: str
    counts: dict[str, int]
    documents: list[SeededDocument]


class EpisodeMemory(Response):
    agent_id: str
    document_id: str
    status: Literal["created", "replaced", "unchanged"]
    operation_id: UUID


class EpisodeResponse(Response):
    scene: str
    turn: int
    speaker: str
    memories: list[EpisodeMemory]


class EpisodeBatchResponse(Response):
    scene: str
    lines: list[EpisodeResponse]
