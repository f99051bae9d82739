"""The write API: accepts content, makes it durable, enqueues the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

from memora.basics import logs
from memora.basics.config import Settings, get_settings, report_environment
from memora.db.pool import Pool, make_pool
from memora.nlp.llm import LazyLLM
from memora.pipeline.handoff import TaskBackend
from memora.retrieval.arms.keyword import KeywordIndex
from memora.webhooks import events as webhook_events
from services.api.errors import BodySizeLimit, install_error_handlers
from services.api.health import Cached, Check, health_router
from services.api.mcp import server as mcp_server
from services.api.metrics import install_metrics
from services.api.proxy import proxy_router
from services.api.routes import (
    admin,
    agents,
    bench,
    conversations,
    graph,
    memories,
    operations,
    portability,
    queues,
    simulation,
    webhooks,
)
from services.api.stack_health import stack_checks
from services.api.tracing import install_tracing
from services.api.upstream import install_upstream_handlers
from services.api.webapp import install_ui
from services.workers.celery_app import create_celery
from services.workers.dispatch import CeleryBackend


def _db_check(app: FastAPI) -> bool:
    with app.state.pool.connection() as conn:
        conn.execute("SELECT 1")
    return True


def create_app(
    settings: Settings | None = None,
    *,
    pool: Pool | None = None,
    backend: TaskBackend | None = None,
) -> FastAPI:
    settings = settings or get_settings()
    logs.configure(settings.log_format, settings.log_level)
    report_environment()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.pool = pool or make_pool(
            settings.require_database_url(),
            min_size=settings.db_pool_min,
            max_size=settings.db_pool_max,
            name="api",
            row_security=settings.row_security,
        )
        try:
            async with mcp_running():
                yield
        finally:
            if pool is None:
                app.state.pool.close()

    app = FastAPI(title="Memora API", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    # Ready = able to make content durable: the database only. With the broker down batches are
    # still accepted and the reconciler enqueues them once it is back; with no worker they wait
    # in their queues. Neither takes the write API out of service (docs/operations.md) unless
    # MEMORA_READY_SCOPE=stack asks it to wait for them (services.api.stack_health).
    checks: dict[str, Check] = {"database": lambda: _db_check(app)}
    informational: dict[str, Check] = {}
    workers: Cached[int] | None = None
    stack: dict[str, Check] = {}
    if backend is None:
        celery = create_celery(settings)
        backend = CeleryBackend(celery)
        webhook_events.use_dispatcher(backend.deliver_webhooks)
        broker = redis.Redis.from_url(
            settings.broker,
            socket_timeout=2,
            socket_connect_timeout=2,
        )
        informational["broker"] = lambda: bool(broker.ping())
        workers = Cached(lambda: len(celery.control.ping(timeout=1.0)), ttl=5.0, default=0)
        stack = stack_checks(celery, settings.query_url, settings.ready_queue_names)
        app.state.celery, app.state.broker = celery, broker
    elif settings.query_url:
        stack = stack_checks(None, settings.query_url, ())
    if settings.ready_scope == "stack":
        checks.update(stack)
    app.state.backend = backend
    app.state.llm = LazyLLM(settings)  # the background merge's
    app.state.keyword_index = KeywordIndex()  # the graph page's text seeds
    install_error_handlers(app)
    install_upstream_handlers(app)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        drain_bytes=settings.max_body_drain_bytes,
        per_path={"/api/import": settings.max_import_bytes},
    )
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    app.include_router(
        health_router(checks, informational=informational, workers=workers, stack=stack)
    )
    # conversations before memories: its document routes would take .../messages/... as a
    # document id
    for module in (
        conversations,
        memories,
        agents,
        admin,
        graph,
        operations,
        portability,
        queues,
        simulation,
        webhooks,
        bench,
    ):
        app.include_router(module.router)
    install_ui(app)
    install_metrics(app, "api", queue_depths="broker" in informational, workers=workers)
    if settings.query_url:
        app.include_router(proxy_router(settings.query_url))
    mcp_running = mcp_server.install(app)  # /mcp/{agent_id}
    install_tracing(app, "memora-api")
    return app
