"""A tenant's webhook endpoints: register (the secret shown once), list, delete, ping, and
their deliveries for operators. Targets are checked against the SSRF rule at registration
(memora.webhooks.guard); the sender checks them again at every attempt."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Invalid, NotFound
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.store import webhooks as store
from memora.webhooks import events, guard, signing


def register(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    url: str,
    event_types: list[str],
    description: str,
) -> dict[str, Any]:
    """A new endpoint with its secret (`whsec_...`, returned here only). A private target is
    refused unless the settings allow them (MEMORA_WEBHOOK_ALLOW_PRIVATE)."""
    unknown = sorted(set(event_types) - set(events.EVENT_TYPES))
    if unknown or not event_types:
        raise Invalid(
            "invalid_events",
            f"events must be some of {', '.join(events.EVENT_TYPES)}",
            {"unknown": unknown},
        )
    try:
        guard.resolve(url, allow_private=app.settings.webhook_allow_private)
    except guard.UnsafeTarget as exc:
        raise Invalid("unsafe_url", str(exc), {"url": url}) from exc
    secret = signing.generate_secret()
    with conn.transaction():
        row = store.create_webhook(
            conn, scope.tenant_id, url, list(dict.fromkeys(event_types)), description, secret
        )
    return {**row, "secret": secret}


def list_webhooks(app: AppContext, conn: Connection[Any], scope: Scope) -> list[dict[str, Any]]:
    return store.list_webhooks(conn, scope.tenant_id)


def _found(conn: Connection[Any], scope: Scope, webhook_id: UUID) -> dict[str, Any]:
    row = store.find_webhook(conn, scope.tenant_id, webhook_id)
    if row is None:
        raise NotFound("not_found", f"webhook {webhook_id} not found")
    return row


def delete(app: AppContext, conn: Connection[Any], scope: Scope, webhook_id: UUID) -> None:
    """Delete an endpoint and its deliveries (404 for one the tenant does not have)."""
    with conn.transaction():
        if not store.delete_webhook(conn, scope.tenant_id, webhook_id):
            raise NotFound("not_found", f"webhook {webhook_id} not found")


def ping(app: AppContext, conn: Connection[Any], scope: Scope, webhook_id: UUID) -> UUID:
    """Send a `webhook.ping` event to one endpoint; the id of its delivery."""
    with conn.transaction():
        found = _found(conn, scope, webhook_id)
        data = {"webhook_id": str(webhook_id), "url": found["url"]}
        (delivery_id,) = events.emit(
            conn, scope.tenant_id, events.PING, data, webhook_id=webhook_id
        )
    events.dispatch_committed(conn, app.backend)
    return delivery_id


def deliveries(
    app: AppContext, conn: Connection[Any], scope: Scope, webhook_id: UUID, limit: int
) -> list[dict[str, Any]]:
    _found(conn, scope, webhook_id)
    return store.list_deliveries(conn, scope.tenant_id, webhook_id, limit)
