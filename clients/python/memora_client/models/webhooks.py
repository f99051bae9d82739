"""Webhooks: the endpoint to register, the endpoints and their deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from memora_client.models.base import Request, Response

WebhookEvent = Literal[
    "operation.completed",
    "operation.failed",
    "memory.superseded",
    "document.deleted",
    "document.trashed",
    "document.restored",
]


class WebhookCreate(Request):
    url: str
    events: list[WebhookEvent]
    description: str = ""


class WebhookDeliveryCounts(Response):
    pending: int = 0
    succeeded: int = 0
    failed: int = 0


class Webhook(Response):
    id: UUID
    url: str
    events: list[str]
    description: str
    created_at: datetime
    deliveries: WebhookDeliveryCounts = Field(default_factory=WebhookDeliveryCounts)


class WebhookCreated(Webhook):
    secret: str  # `whsec_...`: shown once; verifies the deliveries' signatures


class WebhookList(Response):
    webhooks: list[Webhook]


class WebhookDelivery(Response):
    id: UUID
    event_type: str
    event_id: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    next_attempt_at: datetime | None = None
    last_status_code: int | None = None
    last_response: str | None = None
    last_error: str | None = None
    payload: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class WebhookDeliveryList(Response):
    deliveries: list[WebhookDelivery]


class WebhookPing(Response):
    delivery_id: UUID
