"""Liveness and readiness endpoints shared by the API and the query service.

Readiness gates only on what the service needs to answer (`checks`); what it can do without
(`informational`: the write API's broker) is reported beside them and never fails the probe.
The write API's Celery workers have a probe of their own, `/health/workers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from memora.basics import metrics

Check = Callable[[], bool]
T = TypeVar("T")


class Cached(Generic[T]):
    """Runs an expensive probe at most once per `ttl` seconds; `default` when it raises."""

    def __init__(self, probe: Callable[[], T], ttl: float, default: T) -> None:
        self.probe, self.ttl, self.default = probe, ttl, default
        self._at = float("-inf")
        self._value = default

    def __call__(self) -> T:
        now = time.monotonic()
        if now - self._at > self.ttl:
            try:
                self._value = self.probe()
            except Exception:
                self._value = self.default
            self._at = now
        return self._value


def _run(checks: dict[str, Check]) -> dict[str, bool]:
    results: dict[str, bool] = {}
    for name, check in checks.items():
        try:
            results[name] = bool(check())
        except Exception:
            results[name] = False
    return results


def health_router(
    checks: dict[str, Check],
    *,
    informational: dict[str, Check] | None = None,
    workers: Callable[[], int] | None = None,
) -> APIRouter:
    """`/health/live`, `/health/ready` (503 when one of `checks` fails) and, given `workers`
    (how many Celery workers answer a ping), `/health/workers` (503 when none does)."""
    router = APIRouter(prefix="/health", tags=["health"])

    @router.get("/live")
    def live() -> dict[str, str]:
        return {"status": "alive"}

    @router.get("/ready")
    def ready() -> JSONResponse:
        results = _run(checks)
        ok = all(results.values())
        body: dict[str, object] = {"status": "ready" if ok else "not_ready", "checks": results}
        if informational:
            body["informational"] = _run(informational)
        return JSONResponse(body, status_code=200 if ok else 503)

    if workers is not None:
        count_workers = workers

        @router.get("/workers")
        def worker_health() -> JSONResponse:
            try:
                answering = count_workers()
            except Exception:
                answering = 0
            metrics.WORKERS_ANSWERING.set(answering)
            return JSONResponse(
                {"status": "ok" if answering else "no_workers", "workers": answering},
                status_code=200 if answering else 503,
            )

    return router
