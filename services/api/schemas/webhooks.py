"""Webhooks: endpoints (the secret only in the answer that created it) and their deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

EventType = Literal[
    "operation.completed",
    "operation.failed",
    "memory.superseded",
    "document.deleted",
    "document.trashed",
    "document.restored",
]


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1, max_length=2000, description="http(s) URL; public addresses only"
    )
    events: list[EventType] = Field(min_length=1, max_length=10)
    description: str = Field(default="", max_length=500)


class DeliveryCounts(BaseModel):
    pending: int = 0
    succeeded: int = 0
    failed: int = 0


class Webhook(BaseModel):
    id: UUID
    url: str
    events: list[str]
    description: str
    created_at: datetime
    deliveries: DeliveryCounts = Field(default_factory=DeliveryCounts)


class WebhookCreated(Webhook):
    secret: str = Field(description="`whsec_...`: shown once, now; the key that signs deliveries")


class WebhookList(BaseModel):
    webhooks: list[Webhook]


class Delivery(BaseModel):
    id: UUID
    event_type: str
    event_id: str = Field(description="sent as `webhook-id`, the same on every attempt")
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    next_attempt_at: datetime | None = Field(description="when pending: the next attempt")
    last_status_code: int | None
    last_response: str | None = Field(description="the start of the receiver's last answer")
    last_error: str | None
    payload: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class DeliveryList(BaseModel):
    deliveries: list[Delivery]


class PingResponse(BaseModel):
    delivery_id: UUID
