"""Webhooks: a tenant's endpoints and their deliveries (docs/webhooks.md)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Response

from memora.usecases import webhooks
from services.api.deps import ConnDep, ContextDep, ScopeDep
from services.api.errors import AUTH_ERRORS, error_responses
from services.api.schemas.webhooks import (
    Delivery,
    DeliveryCounts,
    DeliveryList,
    PingResponse,
    Webhook,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
)

router = APIRouter(
    prefix="/api/webhooks", tags=["webhooks"], responses=error_responses(*AUTH_ERRORS, 503)
)
NOT_FOUND = error_responses(404, 422)


def _webhook(row: dict[str, Any]) -> dict[str, Any]:
    counts = DeliveryCounts(**{k: row.get(k) or 0 for k in ("pending", "succeeded", "failed")})
    return {**row, "deliveries": counts}


@router.post(
    "", response_model=WebhookCreated, status_code=201, responses=error_responses(400, 413, 422)
)
def register(
    scope: ScopeDep, conn: ConnDep, context: ContextDep, body: WebhookCreate
) -> WebhookCreated:
    """Register an endpoint for these events; the answer carries its signing secret, shown
    only now. A target on a private, loopback or link-local address is refused (422
    `unsafe_url`) unless the server allows them (MEMORA_WEBHOOK_ALLOW_PRIVATE)."""
    row = webhooks.register(context, conn, scope, body.url, list(body.events), body.description)
    return WebhookCreated.model_validate(_webhook(row))


@router.get("", response_model=WebhookList)
def list_webhooks(scope: ScopeDep, conn: ConnDep, context: ContextDep) -> WebhookList:
    """The tenant's endpoints with their deliveries per status (never their secrets)."""
    rows = webhooks.list_webhooks(context, conn, scope)
    return WebhookList(webhooks=[Webhook.model_validate(_webhook(r)) for r in rows])


@router.delete("/{webhook_id}", status_code=204, responses=NOT_FOUND)
def delete(scope: ScopeDep, conn: ConnDep, context: ContextDep, webhook_id: UUID) -> Response:
    """Remove an endpoint and its deliveries."""
    webhooks.delete(context, conn, scope, webhook_id)
    return Response(status_code=204)


@router.post(
    "/{webhook_id}/test", response_model=PingResponse, status_code=202, responses=NOT_FOUND
)
def ping(scope: ScopeDep, conn: ConnDep, context: ContextDep, webhook_id: UUID) -> PingResponse:
    """Send a `webhook.ping` event to the endpoint; follow it in its deliveries."""
    return PingResponse(delivery_id=webhooks.ping(context, conn, scope, webhook_id))


@router.get("/{webhook_id}/deliveries", response_model=DeliveryList, responses=NOT_FOUND)
def deliveries(
    scope: ScopeDep,
    conn: ConnDep,
    context: ContextDep,
    webhook_id: UUID,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> DeliveryList:
    """The endpoint's deliveries, newest first: status, attempts, the last answer."""
    rows = webhooks.deliveries(context, conn, scope, webhook_id, limit)
    return DeliveryList(deliveries=[Delivery.model_validate(r) for r in rows])
