"""The write API: accepts content, makes it durable, enqueues the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import redis
from fastapi import APIRouter, FastAPI
from starlette.middleware.gzip import GZipMiddleware

from memora.basics import logs
from memora.basics.config import Settings, get_settings, report_environment
from memora.db.pool import Pool, make_pool
from memora.nlp.llm import LazyLLM
from memora.pipeline.context import AppContext
from memora.pipeline.handoff import TaskBackend
from memora.retrieval.arms.keyword import KeywordIndex
from services.api.errors import BodySizeLimit, install_error_handlers
from services.api.health import Cached, Check, health_router
from services.api.mcp import server as mcp_server
from services.api.metrics import install_metrics
from services.api.proxy import QueryForwarder
from services.api.reads import read_routing, replica_pool
from services.api.routes import (
    admin,
    agents,
    bench,
    conversations,
    entities,
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

# The write API's routers. conversations before memories: its document routes would take
# .../messages/... as a document id.
ROUTERS = (
    conversations,
    memories,
    agents,
    admin,
    graph,
    entities,
    operations,
    portability,
    queues,
    simulation,
    webhooks,
    bench,
)


def _db_check(app: FastAPI) -> bool:
    with app.state.pool.connection() as conn:
        conn.execute("SELECT 1")
    return True


@dataclass
class _Health:
    """The health router's checks: `checks` decide readiness, `informational` are reported."""

    checks: dict[str, Check]
    informational: dict[str, Check] = field(default_factory=dict)
    workers: Cached[int] | None = None
    stack: dict[str, Check] = field(default_factory=dict)

    def router(self) -> APIRouter:
        return health_router(
            self.checks, informational=self.informational, workers=self.workers, stack=self.stack
        )


def _backend(app: FastAPI, settings: Settings, backend: TaskBackend | None) -> _Health:
    """The task backend on `app.state` (Celery on MEMORA_BROKER_URL unless one is given) and
    the health checks that go with it.

    Ready = able to make content durable: the database only. With the broker down batches are
    still accepted and the reconciler enqueues them once it is back; with no worker they wait
    in their queues. Neither takes the write API out of service (docs/operations.md) unless
    MEMORA_READY_SCOPE=stack asks it to wait for them (services.api.stack_health)."""
    health = _Health({"database": lambda: _db_check(app)})
    if backend is None:
        celery = create_celery(settings)
        backend = CeleryBackend(celery)
        broker = redis.Redis.from_url(settings.broker, socket_timeout=2, socket_connect_timeout=2)
        health.informational["broker"] = lambda: bool(broker.ping())
        health.workers = Cached(lambda: len(celery.control.ping(timeout=1.0)), ttl=5.0, default=0)
        health.stack = stack_checks(celery, settings.query_url, settings.ready_queue_names)
        app.state.celery, app.state.broker = celery, broker
    elif settings.query_url:
        health.stack = stack_checks(None, settings.query_url, ())
    if settings.ready_scope == "stack":
        health.checks.update(health.stack)
    app.state.backend = backend
    return health


def _pool(settings: Settings) -> Pool:
    return make_pool(
        settings.require_database_url(),
        min_size=settings.db_pool_min,
        max_size=settings.db_pool_max,
        name="api",
        row_security=settings.row_security,
    )


def create_app(
    settings: Settings | None = None,
    *,
    pool: Pool | None = None,
    backend: TaskBackend | None = None,
) -> FastAPI:
    """The write API; `backend` receives the work it hands off (stages, webhook deliveries),
    by default the Celery queues of MEMORA_BROKER_URL."""
    settings = settings or get_settings()
    logs.configure(settings.log_format, settings.log_level)
    report_environment()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.pool = pool or _pool(settings)
        state = app.state
        state.context = AppContext(settings, state.pool, state.backend, llm=state.llm)
        # the graph reads' (services.api.deps.ReadConnDep): the replica's when there is one
        replica = replica_pool(settings, "api-replica")
        state.read_routing = read_routing(settings, state.pool, replica)
        try:
            async with mcp_running():
                yield
        finally:
            state.read_routing.close()
            if state.read_routing.replica is not None:
                state.read_routing.replica.close()
            if pool is None:
                app.state.pool.close()

    app = FastAPI(title="Memora API", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    health = _backend(app, settings, backend)
    app.state.llm = LazyLLM(settings)  # the application context's (the background merge)
    app.state.keyword_index = KeywordIndex()  # the graph page's text seeds
    install_error_handlers(app)
    install_upstream_handlers(app)
    if settings.query_url:  # innermost: the body limit and the metrics still see forwarded paths
        app.add_middleware(QueryForwarder, query_url=settings.query_url)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        drain_bytes=settings.max_body_drain_bytes,
        per_path={"/api/import": settings.max_import_bytes},
    )
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    app.include_router(health.router())
    for module in ROUTERS:
        app.include_router(module.router)
    install_ui(app)
    queue_depths = "broker" in health.informational
    install_metrics(app, "api", queue_depths=queue_depths, workers=health.workers)
    mcp_running = mcp_server.install(app)  # /mcp/{agent_id}
    install_tracing(app, "memora-api")
    return app
