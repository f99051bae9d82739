"""What a request through the write API needs besides its database: the query service it
forwards reads to and a Celery worker on every stage's queue (whose models are loaded: a worker
answers only after it loaded them, services.workers.tasks).

`/health/stack` always checks them. `/health/ready` checks them too when MEMORA_READY_SCOPE is
"stack" (`memora serve`, docker compose: one machine, one thing to wait on); in Kubernetes it
stays "self", so that a query pod's restart does not take the write API's pods out of service.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
from celery import Celery

from services.api.health import Cached, Check

INSPECT_TIMEOUT_SECONDS = 1.0
QUERY_TIMEOUT_SECONDS = 2.0


class NotReady(Exception):
    """A dependency does not answer yet; the message says which and why."""


def query_service(query_url: str) -> Check:
    def check() -> bool:
        url = f"{query_url.rstrip('/')}/health/ready"
        try:
            status = httpx.get(url, timeout=QUERY_TIMEOUT_SECONDS).status_code
        except httpx.HTTPError as exc:
            raise NotReady(f"query service at {query_url} does not answer: {exc}") from exc
        if status != 200:
            raise NotReady(f"query service at {query_url} is not ready ({status})")
        return True

    return Cached(check, ttl=5.0)


def active_queues(celery: Celery) -> dict[str, list[str]]:
    """Worker name -> the queues it consumes, for every worker answering within a second."""
    answers: dict[str, list[dict[str, Any]]] = (
        celery.control.inspect(timeout=INSPECT_TIMEOUT_SECONDS).active_queues() or {}
    )
    return {name: sorted(q["name"] for q in found) for name, found in answers.items()}


def stage_workers(celery: Celery, queues: Sequence[str]) -> Check:
    def check() -> bool:
        consumed = {q for found in active_queues(celery).values() for q in found}
        missing = [q for q in queues if q not in consumed]
        if missing:
            raise NotReady(f"no worker consumes {', '.join(missing)} yet")
        return True

    return Cached(check, ttl=5.0)


def stack_checks(
    celery: Celery | None, query_url: str | None, queues: Sequence[str]
) -> dict[str, Check]:
    """The query service's readiness (when reads are forwarded) and a worker on each queue
    (when the pipeline runs on Celery)."""
    checks: dict[str, Check] = {}
    if query_url:
        checks["query_service"] = query_service(query_url)
    if celery is not None and queues:
        checks["workers"] = stage_workers(celery, queues)
    return checks
