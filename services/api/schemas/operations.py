"""Operations: their status per stage, lists and retries."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from memora.basics.stages import OperationStatus


class StageStatus(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    status: str
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    retries: int = Field(default=0, description="times it was retried after failing")
    last_error: str | None = Field(default=None, description="the error before the last retry")


class OperationResponse(BaseModel):
    model_config = ConfigDict(from_attributes=True)

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


class OperationList(BaseModel):
    operations: list[OperationResponse]
    next_cursor: str | None = None


class RetryResponse(BaseModel):
    outcome: Literal["reopened", "active"]
    operation: OperationResponse
