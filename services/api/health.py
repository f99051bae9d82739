"""Liveness and readiness endpoints shared by the API and the query service.

Readiness gates on what the service needs to answer (`checks`); what it can do without
(`informational`: the write API's broker) is reported beside them and never fails the probe.
The write API adds `/health/workers` (Celery workers answering a ping) and `/health/stack`
(everything a request through it needs: services.api.stack_health).
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
_RAISE = object()


class Cached(Generic[T]):
    """Runs an expensive probe at most once per `ttl` seconds, or `ttl_failed` after it failed
    (a recovery shows soon). A failure answers `default` when one is given, else re-raises the
    probe's exception (its message says what is missing)."""

    def __init__(
        self,
        probe: Callable[[], T],
        ttl: float,
        default: T | object = _RAISE,
        ttl_failed: float = 1.0,
    ) -> None:
        self.probe, self.ttl, self.default, self.ttl_failed = probe, ttl, default, ttl_failed
        self._at = float("-inf")
        self._value: T | None = None
        self._error: Exception | None = None

    def __call__(self) -> T:
        now = time.monotonic()
        if now - self._at > (self.ttl if self._error is None else self.ttl_failed):
            try:
                self._value, self._error = self.probe(), None
            except Exception as exc:
                self._error = exc
            self._at = now
        if self._error is not None:
            if self.default is _RAISE:
                raise self._error
            return self.default  # type: ignore[return-value]
        return self._value  # type: ignore[return-value]


def run_checks(checks: dict[str, Check]) -> tuple[dict[str, bool], dict[str, str]]:
    """Each check's outcome, and for the failed ones what their exception said."""
    results: dict[str, bool] = {}
    errors: dict[str, str] = {}
    for name, check in checks.items():
        try:
            results[name] = bool(check())
        except Exception as exc:
            results[name] = False
            errors[name] = str(exc) or type(exc).__name__
    return results, errors


def _answer(checks: dict[str, Check], informational: dict[str, Check] | None) -> JSONResponse:
    results, errors = run_checks(checks)
    ok = all(results.values())
    body: dict[str, object] = {"status": "ready" if ok else "not_ready", "checks": results}
    if errors:
        body["errors"] = errors
    if informational:
        body["informational"] = run_checks(informational)[0]
    return JSONResponse(body, status_code=200 if ok else 503)


def health_router(
    checks: dict[str, Check],
    *,
    informational: dict[str, Check] | None = None,
    workers: Callable[[], int] | None = None,
    stack: dict[str, Check] | None = None,
) -> APIRouter:
    """`/health/live`, `/health/ready` (503 when one of `checks` fails) and, given `workers`
    (how many Celery workers answer a ping), `/health/workers` (503 when none does); given
    `stack` (what requests through this service need besides `checks`), `/health/stack`."""
    router = APIRouter(prefix="/health", tags=["health"])

    @router.get("/live")
    def live() -> dict[str, str]:
        return {"status": "alive"}

    @router.get("/ready")
    def ready() -> JSONResponse:
        return _answer(checks, informational)

    if stack is not None:
        everything = {**checks, **stack}

        @router.get("/stack")
        def stack_ready() -> JSONResponse:
            return _answer(everything, informational)

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
