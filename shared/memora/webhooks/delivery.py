"""Deliveries: claim one, attempt it, record the outcome and schedule the retry.

A delivery is claimed before it is sent (`claimed_until`), so a duplicated task or a sweep
racing a task sends it once. A failed attempt is retried after `retry_delay` seconds
(exponential, capped) while the event is younger than the retry window; after that, or when
the target is refused, the delivery is `failed`. Every attempt's answer is recorded.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from psycopg_pool import ConnectionPool

from memora.basics import metrics
from memora.basics.config import Settings
from memora.store import webhooks as store
from memora.webhooks import signing
from memora.webhooks.sender import Attempt, send

log = logging.getLogger("memora.webhooks")


def retry_delay(attempts: int, settings: Settings) -> float:
    """Seconds to wait after the `attempts`-th failed attempt: base * 2^(attempts-1), capped."""
    exponent = min(max(attempts - 1, 0), 30)
    return float(
        min(
            settings.webhook_retry_base_seconds * 2**exponent,
            settings.webhook_retry_max_delay_seconds,
        )
    )


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def attempt(claimed: store.Claimed, settings: Settings) -> Attempt:
    body = body_of(claimed.payload)
    headers = signing.headers(claimed.secret, claimed.event_id, int(time.time()), body)
    return send(
        claimed.url,
        body,
        headers | {"user-agent": "Memora-Webhooks/1"},
        allow_private=settings.webhook_allow_private,
        connect_timeout=settings.webhook_connect_timeout_seconds,
        total_timeout=settings.webhook_timeout_seconds,
    )


def deliver(pool: ConnectionPool[Any], delivery_id: UUID, settings: Settings) -> str | None:
    """One attempt of a delivery; its status afterwards (None: nothing was due)."""
    hold = settings.webhook_timeout_seconds + settings.webhook_connect_timeout_seconds + 30
    with pool.connection() as conn:
        claimed = store.claim(conn, delivery_id, hold)
    if claimed is None:
        return None
    result = attempt(claimed, settings)  # no connection held while the receiver answers
    status, retry_in = "succeeded", None
    if not result.succeeded:
        delay = retry_delay(claimed.attempts, settings)
        age = (datetime.now(UTC) - claimed.created_at).total_seconds()
        within = age + delay <= settings.webhook_retry_window_seconds
        status, retry_in = ("pending", delay) if result.retry and within else ("failed", None)
    with pool.connection() as conn:
        store.record(
            conn,
            delivery_id,
            status=status,
            retry_in_seconds=retry_in,
            status_code=result.status_code,
            response=result.response,
            error=result.error,
        )
    metrics.WEBHOOK_ATTEMPTS.labels("retrying" if status == "pending" else status).inc()
    log.info(
        "webhook attempt",
        extra={
            "delivery": str(delivery_id),
            "attempt": claimed.attempts,
            "status": status,
            "code": result.status_code,
            "retry_in": retry_in,
        },
    )
    return status


def take_due(pool: ConnectionPool[Any], settings: Settings, limit: int = 500) -> list[UUID]:
    """Due deliveries to send now (store.webhooks.take_due), committed as dispatched."""
    with pool.connection() as conn:
        return store.take_due(conn, settings.webhook_redispatch_after_seconds, limit)
