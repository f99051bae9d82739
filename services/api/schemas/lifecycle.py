"""The memory lifecycle (seed 002 §4.4): remember, forget, recall, reflect, link."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
)

from memora.basics.models import (
    StorableText,
    aware,
)
from memora.lifecycle.memory import RememberResult
from memora.lifecycle.recall import RecallQuery
from services.api.schemas.search import AfterOperation, AsOf

Category = Annotated[StorableText, Field(min_length=1, max_length=100)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RememberRequest(Strict):
    content: Annotated[StorableText, Field(min_length=1)]
    category: Category | None = None
    importance: Annotated[float | None, Field(ge=1, le=10)] = None
    related_to: Annotated[list[UUID], Field(max_length=100)] = Field(default_factory=list)


class RememberResponse(BaseModel):
    decision: Literal["ADD", "SKIP", "MERGE", "SUPERSEDE"]
    memory_id: UUID
    reason: str
    decided_by: str
    superseded_id: UUID | None = None
    merged_into: UUID | None = None
    linked: list[UUID] = Field(default_factory=list)

    @classmethod
    def of(cls, result: RememberResult) -> RememberResponse:
        return cls(
            decision=result.decision.value,
            memory_id=result.memory_id,
            reason=result.reason,
            decided_by=result.decided_by,
            superseded_id=result.superseded_id,
            merged_into=result.merged_into,
            linked=result.linked,
        )


class EditRequest(Strict):
    content: Annotated[StorableText, Field(min_length=1)]


class EditResponse(BaseModel):
    memory_id: UUID = Field(description="the new version")
    superseded_id: UUID = Field(description="the edited memory, now superseded by the new one")


class ForgetRequest(Strict):
    memory_id: UUID | None = None
    query: Annotated[StorableText | None, Field(min_length=1, max_length=2000)] = None
    reason: Annotated[StorableText | None, Field(max_length=1000)] = None
    dry_run: bool = False
    confirm: bool = False  # needed to forget more than MEMORA_FORGET_QUERY_CAP by query


class ForgetResponse(BaseModel):
    dry_run: bool
    forgotten: list[dict[str, Any]]
    restorable_for_days: float


class TimeRange(Strict):
    """When the memories were said: start ≤ event date < end (naive times are UTC)."""

    start: Annotated[datetime | None, AfterValidator(aware)] = None
    end: Annotated[datetime | None, AfterValidator(aware)] = None


class RecallRequest(Strict):
    query: Annotated[StorableText, Field(min_length=1, max_length=2000)]
    limit: Annotated[int, Field(ge=1, le=100)] = 10
    time_range: TimeRange | None = None
    categories: Annotated[list[Category] | None, Field(min_length=1, max_length=50)] = None
    include_reflections: bool = True
    as_of: AsOf = None
    after_operation: AfterOperation = None

    def to_query(self) -> RecallQuery:
        window = self.time_range or TimeRange()
        categories = tuple(self.categories) if self.categories else None
        return RecallQuery(
            self.query, self.limit, window.start, window.end, categories,
            self.include_reflections, self.as_of,
        )  # fmt: skip


class ReflectRequest(Strict):
    topic: Annotated[StorableText | None, Field(min_length=1, max_length=500)] = None
    depth: Literal["shallow", "deep"] = "shallow"


class LinkRequest(Strict):
    memory_id: UUID
    related_memory_id: UUID
    relationship: Annotated[StorableText, Field(min_length=1, max_length=100)] = "related_to"
    weight: Annotated[float, Field(gt=0, le=1)] = 1.0
