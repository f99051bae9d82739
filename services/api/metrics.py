"""Prometheus for the API and the query service: an ASGI middleware timing every request by
route template and status, and GET /metrics, which also refreshes the scrape-time gauges
(database pool use; for the write API queue depths and operations per state, cached).

One line in an app factory: `install_metrics(app, "api", queue_depths=...)`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memora.basics import metrics
from memora.nlp import llm
from memora.pipeline.monitoring import beat_heartbeat, operation_stats, queue_oldest_ages
from memora.pipeline.monitoring import queue_depths as broker_queue_depths

log = logging.getLogger("memora.metrics")
request_log = logging.getLogger("memora.request")
UNMATCHED = "unmatched"
# Scrapes and probes are not load: the in-flight gauge (KEDA's signal for the query pods)
# leaves them out.
NOT_IN_FLIGHT = ("/metrics", "/health/")


def route_template(scope: Scope, routes: list[BaseRoute]) -> str:
    """The route's path template ("/api/operations/{operation_id}"), never the raw path, so
    that label values stay few. Requests the router never saw (rejected by an outer
    middleware) are matched here; anything else is "unmatched"."""
    route = scope.get("route")
    if route is None:
        for candidate in routes:
            match, _ = candidate.matches(scope)
            if match == Match.FULL:
                route = candidate
                break
    if route is None:
        return UNMATCHED
    return str(getattr(route, "path_format", None) or getattr(route, "path", UNMATCHED))


def operation_of(scope: Scope) -> str | None:
    """The operation a request addressed (a path parameter) or created (set by the route with
    `note_operation`)."""
    found = scope.get("state", {}).get("operation_id") or scope.get("path_params", {}).get(
        "operation_id"
    )
    return str(found) if found else None


def note_operation(request: Request, operation_id: object) -> None:
    """Name the operation a request created, for the request log."""
    request.state.operation_id = operation_id


class PrometheusMiddleware:
    """Times every request by route template and status, and writes the request log (method,
    route, status, duration, and the operation id where there is one)."""

    def __init__(self, app: ASGIApp, service: str, routes: Callable[[], list[BaseRoute]]) -> None:
        self.app, self.service, self.routes = app, service, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        in_progress = metrics.HTTP_IN_PROGRESS.labels(self.service)
        counted = not scope["path"].startswith(NOT_IN_FLIGHT)
        if counted:
            in_progress.inc()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if counted:
                in_progress.dec()
            labels = (self.service, scope["method"], route_template(scope, self.routes()), status)
            seconds = time.perf_counter() - started
            metrics.HTTP_REQUESTS.labels(*labels).inc()
            metrics.HTTP_LATENCY.labels(*labels).observe(seconds)
            fields = {
                "service": self.service,
                "method": labels[1],
                "route": labels[2],
                "status": status,
                "duration_ms": round(seconds * 1000, 1),
            }
            if operation := operation_of(scope):
                fields["operation"] = operation
            request_log.info("request", extra=fields)


class Throttled:
    """Runs `refresh` at most once per `ttl` seconds; a failure is logged, never raised (a
    scrape must answer while Redis or the database is down: the health checks report those)."""

    def __init__(self, refresh: Callable[[], None], ttl: float) -> None:
        self.refresh, self.ttl = refresh, ttl
        self._at = float("-inf")
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._at < self.ttl:
                return
            self._at = now
        try:
            self.refresh()
        except Exception as exc:
            log.warning("metrics refresh failed: %s", exc)


def install_metrics(
    app: FastAPI,
    service: str,
    *,
    queue_depths: bool = False,
    workers: Callable[[], int] | None = None,
) -> None:
    """Middleware, /metrics and the LLM usage hook. `queue_depths`: also export the broker's
    queue depths and beat's heartbeat; `workers`: how many Celery workers answer a ping; the
    write API ("api") also exports operations per state."""
    settings = app.state.settings
    metrics.install_llm_hook(llm.usage)
    app.add_middleware(PrometheusMiddleware, service=service, routes=lambda: app.router.routes)

    def pool_use() -> None:
        pool = getattr(app.state, "pool", None)
        if pool is not None:
            metrics.record_pool(str(getattr(pool, "name", service)), pool.get_stats())

    def operations() -> None:
        with app.state.pool.connection() as conn:
            stats = operation_stats(conn)
        metrics.record_operations(
            stats.by_status, stats.active_by_stage, stats.oldest_active_seconds
        )

    refreshers: list[Callable[[], None]] = [Throttled(pool_use, 0.0)]
    if service == "api":
        refreshers.append(Throttled(operations, settings.metrics_cache_seconds))
    if queue_depths:
        client = redis.Redis.from_url(settings.broker, socket_timeout=2, socket_connect_timeout=2)

        def broker_gauges() -> None:
            metrics.record_queue_depths(broker_queue_depths(client), queue_oldest_ages(client))
            metrics.record_beat_heartbeat(beat_heartbeat(client))

        refreshers.append(Throttled(broker_gauges, settings.metrics_cache_seconds))

    if service == "query":
        caches = lambda: metrics.record_read_caches(app.state.retriever.caches.footprint())  # noqa: E731
        refreshers.append(Throttled(caches, 0.0))
    if service == "query" and settings.read_database_url:
        refreshers.append(Throttled(lambda: app.state.reads.record_lag(), 0.0))
    if workers is not None:
        count_workers = workers
        refreshers.append(Throttled(lambda: metrics.WORKERS_ANSWERING.set(count_workers()), 0.0))

    def metrics_endpoint() -> Response:
        for refresh in refreshers:
            refresh()
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    app.add_api_route("/metrics", metrics_endpoint, methods=["GET"], include_in_schema=False)
