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
    DocumentId,
    MemoryItem,
    StorableText,
    message_ids,
)
from memora.usecases.ingest import Accepted


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    items: list[MemoryItem] = Field(min_length=1)
    document_id: DocumentId | None = None
    title: StorableText | None = Field(default=None, max_length=500)  # the conversation's

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
    status: Literal["created", "unchanged", "replaced"]

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


class DocumentSummary(BaseModel):
    document_id: str
    item_count: int
    unit_count: int
    operation_id: UUID | None
    status: str | None
    created_at: datetime
    updated_at: datetime


class DocumentDetail(DocumentSummary):
    agent_id: str
    items: list[dict[str, Any]] = Field(description="the items as they were stored, verbatim")


class DocumentList(BaseModel):
    agent_id: str
    documents: list[DocumentSummary]


class DeleteResponse(BaseModel):
    success: bool
    agent_id: str
    document_id: str
    deleted: dict[str, Any]
