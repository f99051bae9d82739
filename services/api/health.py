"""Liveness and readiness endpoints shared by the API and the query service."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse

Check = Callable[[], bool]


class CachedCheck:
    """Runs an expensive check at most once per `ttl` seconds."""

    def __init__(self, check: Check, ttl: float = 5.0) -> None:
        self.check, self.ttl = check, ttl
        self._at = 0.0
        self._value = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self._at > self.ttl:
            try:
                self._value = self.check()
            except Exception:
                self._value = False
            self._at = now
        return self._value


def health_router(checks: dict[str, Check]) -> APIRouter:
    router = APIRouter(prefix="/health", tags=["health"])

    @router.get("/live")
    def live() -> dict[str, str]:
        return {"status": "alive"}

    @router.get("/ready")
    def ready() -> JSONResponse:
        results: dict[str, bool] = {}
        for name, check in checks.items():
            try:
                results[name] = bool(check())
            except Exception:
                results[name] = False
        ok = all(results.values())
        return JSONResponse(
            {"status": "ready" if ok else "not_ready", "checks": results},
            status_code=200 if ok else 503,
        )

    return router
