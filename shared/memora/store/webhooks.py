"""Webhooks and their deliveries (the outbox). Tenant routes pass the tenant (and run under
row-level security); the sender claims deliveries by id across tenants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.store.rows import fetch_one

_WEBHOOK = "id, tenant_id, url, events, description, created_at"
_DELIVERY = (
    "id, webhook_id, event_type, event_id, payload, status, attempts, next_attempt_at, "
    "last_status_code, last_response, last_error, created_at, updated_at"
)


@dataclass(frozen=True)
class Claimed:
    """A delivery a sender holds for one attempt, with what it needs to send it."""

    id: UUID
    event_id: str
    payload: dict[str, Any]
    attempts: int  # this attempt included
    created_at: datetime
    url: str
    secret: str


def create_webhook(
    conn: Connection[Any],
    tenant_id: str,
    url: str,
    events: list[str],
    description: str,
    secret: str,
) -> dict[str, Any]:
    row = conn.execute(
        f"INSERT INTO webhooks (tenant_id, url, events, description, secret) "
        f"VALUES (%s, %s, %s, %s, %s) RETURNING {_WEBHOOK}",
        (tenant_id, url, events, description, secret),
    ).fetchone()
    assert row is not None
    created: dict[str, Any] = row
    return created


def list_webhooks(conn: Connection[Any], tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's endpoints (never their secrets) with their deliveries' counts per status."""
    return conn.execute(
        """
        SELECT w.id, w.tenant_id, w.url, w.events, w.description, w.created_at,
               count(*) FILTER (WHERE d.status = 'pending') AS pending,
               count(*) FILTER (WHERE d.status = 'succeeded') AS succeeded,
               count(*) FILTER (WHERE d.status = 'failed') AS failed
        FROM webhooks w LEFT JOIN webhook_deliveries d ON d.webhook_id = w.id
        WHERE w.tenant_id = %s GROUP BY w.id ORDER BY w.created_at, w.id
        """,
        (tenant_id,),
    ).fetchall()


def find_webhook(conn: Connection[Any], tenant_id: str, webhook_id: UUID) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(
        f"SELECT {_WEBHOOK}, secret FROM webhooks WHERE id = %s AND tenant_id = %s",
        (webhook_id, tenant_id),
    ).fetchone()
    return row


def delete_webhook(conn: Connection[Any], tenant_id: str, webhook_id: UUID) -> bool:
    """Delete an endpoint and its deliveries; False when the tenant has no such endpoint."""
    deleted = conn.execute(
        "DELETE FROM webhooks WHERE id = %s AND tenant_id = %s", (webhook_id, tenant_id)
    )
    return deleted.rowcount > 0


def enqueue(
    conn: Connection[Any],
    tenant_id: str,
    event_type: str,
    event_id: str,
    payload: dict[str, Any],
    *,
    webhook_id: UUID | None = None,
) -> list[UUID]:
    """A pending delivery of the event to each of the tenant's endpoints that takes its type
    (or to `webhook_id` alone, whatever its types: a ping)."""
    rows = conn.execute(
        """
        INSERT INTO webhook_deliveries (webhook_id, tenant_id, event_type, event_id, payload)
        SELECT id, tenant_id, %(type)s, %(event)s, %(payload)s FROM webhooks
        WHERE tenant_id = %(tenant)s
          AND (CASE WHEN %(only)s::uuid IS NULL THEN %(type)s = ANY (events)
                    ELSE id = %(only)s::uuid END)
        ON CONFLICT (webhook_id, event_id) DO NOTHING
        RETURNING id
        """,
        {
            "type": event_type,
            "event": event_id,
            "payload": Jsonb(payload),
            "tenant": tenant_id,
            "only": webhook_id,
        },
    ).fetchall()
    return [r["id"] for r in rows]


def claim(conn: Connection[Any], delivery_id: UUID, hold_seconds: float) -> Claimed | None:
    """Take a pending delivery that is due and that no sender holds, counting the attempt;
    None when there is nothing to send (sent, failed, not yet due, held, or gone)."""
    return fetch_one(
        conn,
        Claimed,
        """
        WITH taken AS (
            UPDATE webhook_deliveries SET attempts = attempts + 1, updated_at = now(),
                   claimed_until = now() + make_interval(secs => %(hold)s)
            WHERE id = %(id)s AND status = 'pending' AND next_attempt_at <= now()
              AND (claimed_until IS NULL OR claimed_until < now())
            RETURNING id, webhook_id, event_id, payload, attempts, created_at)
        SELECT t.id, t.event_id, t.payload, t.attempts, t.created_at, w.url, w.secret
        FROM taken t JOIN webhooks w ON w.id = t.webhook_id
        """,
        {"id": delivery_id, "hold": hold_seconds},
    )


def record(
    conn: Connection[Any],
    delivery_id: UUID,
    *,
    status: str,
    retry_in_seconds: float | None,
    status_code: int | None,
    response: str | None,
    error: str | None,
) -> None:
    """An attempt's outcome: `status` (pending again when `retry_in_seconds` is set)."""
    conn.execute(
        """
        UPDATE webhook_deliveries SET status = %(status)s, claimed_until = NULL,
            dispatched_at = NULL,
            next_attempt_at = now() + make_interval(secs => coalesce(%(retry)s, 0)),
            last_status_code = %(code)s, last_response = %(response)s, last_error = %(error)s,
            updated_at = now()
        WHERE id = %(id)s
        """,
        {
            "status": status,
            "retry": retry_in_seconds,
            "code": status_code,
            "response": response,
            "error": error,
            "id": delivery_id,
        },
    )


def take_due(conn: Connection[Any], redispatch_after: float, limit: int = 500) -> list[UUID]:
    """Pending deliveries whose time has come, that no sender holds, and for which no task
    was sent (a retry) or the task sent `redispatch_after` seconds ago looks lost; marked
    dispatched now, oldest first. A backlog is thus not enqueued again at every sweep."""
    rows = conn.execute(
        """
        UPDATE webhook_deliveries SET dispatched_at = now()
        WHERE id IN (
            SELECT id FROM webhook_deliveries
            WHERE status = 'pending' AND next_attempt_at <= now()
              AND (claimed_until IS NULL OR claimed_until < now())
              AND (dispatched_at IS NULL
                   OR dispatched_at < now() - make_interval(secs => %(after)s))
            ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
        RETURNING id
        """,
        {"after": redispatch_after, "limit": limit},
    ).fetchall()
    return [r["id"] for r in rows]


def list_deliveries(
    conn: Connection[Any], tenant_id: str, webhook_id: UUID, limit: int
) -> list[dict[str, Any]]:
    """An endpoint's deliveries, newest first."""
    return conn.execute(
        f"SELECT {_DELIVERY} FROM webhook_deliveries WHERE webhook_id = %s AND tenant_id = %s "
        "ORDER BY created_at DESC, id DESC LIMIT %s",
        (webhook_id, tenant_id, limit),
    ).fetchall()
