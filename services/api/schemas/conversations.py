"""Conversations (seed 002 §7): one message edited or deleted; search over raw messages."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from memora.basics.models import (
    AgentId,
    Channel,
    DocumentId,
    MemoryItem,
    MessageId,
    Role,
    StorableText,
    aware,
    temporary_items,
    with_channel,
)
from memora.retrieval.conversation import MAX_LIMIT, ConversationHit, ConversationQuery
from memora.usecases.conversations import MessagePatch, SyncResult
from memora.usecases.ingest import AppendAccepted
from services.api.schemas.memories import CHANNEL, TEMPORARY
from services.api.schemas.search import AfterOperation


class AppendedMessage(MemoryItem):
    """A message of a live conversation: its id (unique in the conversation) and role are
    required; `event_date` orders it (default: when it arrives)."""

    message_id: MessageId
    role: Role


class AppendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[AppendedMessage] = Field(min_length=1)
    title: StorableText | None = Field(default=None, max_length=500)
    temporary: bool = Field(default=False, description=TEMPORARY)
    channel: Channel | None = Field(default=None, description=CHANNEL)
    end_of_conversation: bool = Field(
        default=False,
        description="the session ends here: once these messages are processed, the agent's "
        "memory evolution runs (consolidation, and reflection when due) as an `evolve` "
        "operation, instead of at the periodic jobs' next run",
    )

    @model_validator(mode="after")
    def _temporary(self) -> AppendRequest:
        if self.temporary:
            self.messages = temporary_items(self.messages)
        self.messages = with_channel(self.messages, self.channel)
        return self

    @model_validator(mode="after")
    def _unique_message_ids(self) -> AppendRequest:
        ids = [m.message_id for m in self.messages]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"message_id {repeated[0]!r} appears twice in the request")
        return self


class AppendResponse(BaseModel):
    success: bool
    agent_id: str
    conversation_id: str
    operation_id: UUID = Field(
        description="the append's operation; for messages all stored already, the one that "
        "processed them"
    )
    status: Literal["created", "appended", "unchanged"]
    messages_new: int
    messages_existing: int

    @classmethod
    def of(cls, done: AppendAccepted) -> AppendResponse:
        return cls(
            success=True,
            agent_id=done.agent_id,
            conversation_id=done.document_id,
            operation_id=done.operation_id,
            status=done.outcome,
            messages_new=done.new,
            messages_existing=done.existing,
        )


class MessageEdit(BaseModel):
    """What changes; omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    content: StorableText | None = Field(default=None, min_length=1)
    role: Role | None = None
    speaker: StorableText | None = Field(default=None, max_length=200)
    event_date: Annotated[datetime | None, AfterValidator(aware)] = None

    def patch(self) -> MessagePatch:
        return MessagePatch(self.content, self.role, self.speaker, self.event_date)

    @model_validator(mode="after")
    def _something(self) -> MessageEdit:
        if self.content is not None and not self.content.strip():
            raise ValueError("content must not be empty or whitespace")
        if not self.model_fields_set:
            raise ValueError("give at least one of content, role, speaker, event_date")
        return self


class MessageSyncResponse(BaseModel):
    success: bool
    agent_id: str
    document_id: str
    message_id: str
    operation_id: UUID | None = Field(description="the pipeline work it started, if any")
    counts: dict[str, int]

    @classmethod
    def of(cls, result: SyncResult) -> MessageSyncResponse:
        return cls(
            success=True,
            agent_id=result.agent_id,
            document_id=result.document_id,
            message_id=result.message_id,
            operation_id=result.operation_id,
            counts=result.counts,
        )


When = Annotated[datetime | None, AfterValidator(aware)]


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: When = None
    end: When = None

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and self.start > self.end:
            raise ValueError("time_range.start must not be after time_range.end")
        return self


class ConversationSearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[StorableText, Field(min_length=1, max_length=2000)]
    limit: Annotated[
        int,
        Field(ge=1, description=f"how many messages (default 5); above {MAX_LIMIT}: {MAX_LIMIT}"),
        AfterValidator(lambda n: min(n, MAX_LIMIT)),
    ] = 5
    document_id: Annotated[DocumentId | None, Field(description="one conversation only")] = None
    time_range: TimeRange | None = None
    roles: Annotated[list[Role] | None, Field(min_length=1)] = None
    channel: Annotated[
        Channel | list[Channel] | None,
        Field(description="only messages said in this channel (or in any of a list)"),
    ] = None
    after_operation: AfterOperation = None
    min_score: Annotated[
        float | None, Field(ge=0, le=1, description="default: MEMORA_CONVERSATION_MIN_SCORE")
    ] = None
    highlight: Annotated[
        bool | None,
        Field(
            description="give each result the words the query matched (`highlights`, "
            "`snippet_highlighted`); default: MEMORA_CONVERSATION_HIGHLIGHT"
        ),
    ] = None

    def to_query(self) -> ConversationQuery:
        window = self.time_range or TimeRange()
        return ConversationQuery(
            agent_id=self.agent_id,
            query=self.query,
            limit=self.limit,
            document_id=self.document_id,
            start=window.start,
            end=window.end,
            roles=self.roles,
            channels=[self.channel] if isinstance(self.channel, str) else self.channel,
            min_score=self.min_score,
            highlight=self.highlight,
        )

    @model_validator(mode="after")
    def _not_blank(self) -> ConversationSearchRequest:
        if not self.query.strip():
            raise ValueError("query must not be empty or whitespace")
        return self


def bold(hit: ConversationHit) -> str:
    """The snippet with its highlighted words between ** (Markdown bold)."""
    text, out, at = hit.snippet, [], 0
    for start, end in hit.highlights or []:
        out += [text[at:start], "**", text[start:end], "**"]
        at = end
    return "".join([*out, text[at:]])


class ConversationResult(BaseModel):
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
    highlights: Annotated[
        list[tuple[int, int]] | None,
        Field(description="with highlight: [start, end) offsets in snippet of matched words"),
    ] = None
    snippet_highlighted: Annotated[
        str | None, Field(description="with highlight: the snippet, matched words in **bold**")
    ] = None

    @classmethod
    def of(cls, rank: int, hit: ConversationHit) -> ConversationResult:
        result = cls(
            rank=rank,
            score=hit.score,
            conversation_id=hit.document_id,
            conversation_title=hit.title,
            message_id=hit.message_id,
            message_ids=hit.message_ids,
            role=hit.role,
            speaker=hit.speaker,
            channel=hit.channel,
            timestamp=hit.timestamp,
            snippet=hit.snippet,
            vector_score=hit.vector_score,
            keyword_score=hit.keyword_score,
        )
        if hit.highlights is not None:  # set only when asked for: the route leaves unset out
            result.highlights = hit.highlights
            result.snippet_highlighted = bold(hit)
        return result


class ConversationSearchResponse(BaseModel):
    query: str
    total_results: int
    results: list[ConversationResult]
