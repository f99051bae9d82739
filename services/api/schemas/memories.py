"""Storing memories and reading documents (seed 003 "Store Memories")."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from memora.basics.models import (
    AgentId,
    Channel,
    DocumentId,
    FactType,
    MemoryItem,
    StorableText,
    message_ids,
    temporary_items,
    with_channel,
)
from memora.usecases.ingest import Accepted, AppendAccepted

TEMPORARY = (
    "a temporary chat: the items are stored as messages of their conversation (a document none "
    "of whose messages is remembered is deleted MEMORA_TEMPORARY_CHAT_RETENTION_DAYS after its "
    "last change), no memory is extracted from them and they stay out of the conversation index "
    "unless an item says `searchable: true`"
)

CHANNEL = (
    "where the items were said (`web`, `console`, `teams`, any label of up to 64 characters), "
    "for those that name none: conversation search and memory search can keep to a channel"
)


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    items: list[MemoryItem] = Field(min_length=1)
    document_id: DocumentId | None = None
    title: StorableText | None = Field(default=None, max_length=500)  # the conversation's
    # "append": the items are added to the document (a conversation) as new messages, those it
    # holds already are skipped (see POST /api/agents/{agent_id}/conversations/{id}/messages);
    # "replace" (the default, seed behaviour): the items become the document's whole content.
    update_mode: Literal["replace", "append"] = "replace"
    temporary: bool = Field(default=False, description=TEMPORARY)
    channel: Channel | None = Field(default=None, description=CHANNEL)

    @model_validator(mode="after")
    def _temporary(self) -> BatchRequest:
        if self.temporary:
            self.items = temporary_items(self.items)
        self.items = with_channel(self.items, self.channel)
        return self

    @model_validator(mode="after")
    def _append_names_its_document(self) -> BatchRequest:
        if self.update_mode == "append" and self.document_id is None:
            raise ValueError("update_mode append needs the document_id of the conversation")
        return self

    @model_validator(mode="after")
    def _unique_message_ids(self) -> BatchRequest:
        seen: set[str] = set()
        for message_id in message_ids(self.items):
            if message_id in seen:
                raise ValueError(f"message_id {message_id!r} appears twice in the document")
            seen.add(message_id)
        return self


class BatchResponse(BaseModel):
    success: bool
    message: str
    agent_id: str
    document_id: str
    items_count: int
    operation_id: UUID
    status: Literal["created", "unchanged", "replaced", "appended"]
    # update_mode append only: messages stored now, and those the document held already
    messages_new: int | None = None
    messages_existing: int | None = None

    @classmethod
    def of(cls, accepted: Accepted) -> BatchResponse:
        n = accepted.items_count
        message = {
            "created": f"Successfully stored {n} memory items",
            "replaced": f"Replaced document content with {n} memory items",
            "unchanged": "Document already stored with identical content; nothing new was created",
        }[accepted.outcome]
        return cls(
            success=True,
            message=message,
            agent_id=accepted.agent_id,
            document_id=accepted.document_id,
            items_count=n,
            operation_id=accepted.operation_id,
            status=accepted.outcome,
        )

    @classmethod
    def of_append(cls, done: AppendAccepted, items: int) -> BatchResponse:
        return cls(
            success=True,
            message=_appended_message(done),
            agent_id=done.agent_id,
            document_id=done.document_id,
            items_count=items,
            operation_id=done.operation_id,
            status=done.outcome,
            messages_new=done.new,
            messages_existing=done.existing,
        )


def _appended_message(done: AppendAccepted) -> str:
    if done.outcome == "unchanged":
        return "All messages were already in the conversation; nothing new was stored"
    return f"Appended {done.new} new messages ({done.existing} already stored)"


class DocumentSummary(BaseModel):
    document_id: str
    item_count: int
    unit_count: int
    operation_id: UUID | None
    status: str | None
    created_at: datetime
    updated_at: datetime
    trashed_at: datetime | None = Field(
        default=None, description="when it went to the trash (null: it is live)"
    )
    purge_after: datetime | None = Field(
        default=None,
        description="in the trash: when it is deleted for real (restorable until then)",
    )


class DocumentDetail(DocumentSummary):
    agent_id: str
    items: list[dict[str, Any]] = Field(description="the items as they were stored, verbatim")


class DocumentList(BaseModel):
    agent_id: str
    documents: list[DocumentSummary]


class DeleteResponse(BaseModel):
    """A hard delete answers the first four fields; a soft one (`?soft=true`) all of them."""

    success: bool
    agent_id: str
    document_id: str
    deleted: dict[str, Any] = Field(
        description="hard: the rows deleted per kind; soft: units_trashed, messages_hidden, "
        "chunks_hidden (zero with already_trashed or already_absent)"
    )
    state: Literal["trashed", "absent"] | None = Field(
        default=None, description="soft only: the document is in the trash, or does not exist"
    )
    trashed_at: datetime | None = Field(
        default=None, description="soft only: when it went to the trash"
    )
    purge_after: datetime | None = Field(
        default=None, description="soft only: when it is deleted for real (restorable until then)"
    )


class RestoreResponse(BaseModel):
    success: bool
    agent_id: str
    document_id: str
    state: Literal["active"]
    restored: dict[str, Any] = Field(
        description="units_restored (back to the status each had), messages_restored and "
        "chunks_restored (found by conversation search again)"
    )


# ------------------------------------------------------------ one memory in full (its view)
UnitFactType = FactType | Literal["reflection"]  # reflections are units too (the lifecycle's)
MemoryStatus = Literal["active", "superseded", "forgotten", "archived", "trashed"]


class MentionedEntity(BaseModel):
    id: UUID
    name: str = Field(description="the entity's canonical name")
    entity_type: str
    mention: str = Field(description="the words that named it in this memory")


class MemoryLink(BaseModel):
    target: UUID = Field(description="the linked memory")
    type: str = Field(
        description="temporal, semantic, entity, causes, caused_by, enables, prevents, "
        "explicit (the link operation's) or reflection (a reflection and its sources)"
    )
    weight: float
    relationship: str | None = Field(description="an explicit link's relationship")
    label: str = Field(description="the start of the linked memory's text (80 characters)")
    status: MemoryStatus = Field(description="the linked memory's status")


class MemoryEvent(BaseModel):
    event: str = Field(
        description="added, merged, superseded, forgotten, restored, archived, trashed, linked, "
        "reflected…"
    )
    at: datetime
    reason: str | None
    actor: str = Field(description="who: api:<key id>, api, job:<name>")
    related_id: UUID | None = Field(description="the other memory, where there is one")
    details: dict[str, Any]


class Memory(BaseModel):
    """One memory in full, in any status (`GET /api/agents/{agent_id}/memories/{id}`)."""

    id: UUID
    agent_id: str
    text: str
    context: str | None
    fact_type: UnitFactType
    category: str | None
    importance: float = Field(description="1 to 10")
    event_date: datetime = Field(description="when it was said (the item's event date)")
    occurred_start: datetime | None = Field(description="when what it tells happened, if known")
    occurred_end: datetime | None
    mentioned_at: datetime
    created_at: datetime = Field(description="when it was stored")
    confidence_score: float | None
    metadata: dict[str, Any]
    status: MemoryStatus = Field(
        description="only active memories are searched, but as_of (and a question about a "
        "past period) also finds superseded ones; trashed: its document is in the trash"
    )
    status_at: datetime | None = Field(description="when the status last changed")
    status_reason: str | None
    superseded_by: UUID | None = Field(description="the memory that replaced it (superseded)")
    supersedes: UUID | None = Field(description="an opinion's: the version it revised")
    valid_from: datetime = Field(description="when its fact began to hold")
    valid_until: datetime | None = Field(
        description="when a later fact replaced it (superseded); null: still true"
    )
    evidence_count: int = Field(description="how many times the fact was stated")
    embedded: bool = Field(description="its embedding is stored (semantic search finds it)")
    document_id: str | None = Field(description="the source document (null: none, e.g. remember)")
    item_index: int
    access_count: int
    last_accessed_at: datetime | None
    entities: list[MentionedEntity]
    links: list[MemoryLink] = Field(
        description="its outgoing links: explicit ones first, then the strongest (50 at most)"
    )
    history: list[MemoryEvent] = Field(description="every change to it, oldest first")
    replaced: list[UUID] = Field(description="the memories it superseded or absorbed")
