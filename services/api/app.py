"""The write API: accepts content, makes it durable, enqueues the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
from fastapi import FastAPI
from psycopg_pool import ConnectionPool

from memora.config import Settings, get_settings
from memora.db.pool import make_pool
from memora.pipeline.backend import TaskBackend
from services.api.errors import BodySizeLimit, install_error_handlers
from services.api.health import CachedCheck, health_router
from services.api.metrics import install_metrics
from services.api.proxy import proxy_router
from services.api.routes import admin, agents, memories, simulation
from services.mcp import server as mcp_server
from services.workers.celery_app import create_celery
from services.workers.dispatch import CeleryBackend


def _db_check(app: FastAPI) -> bool:
    with app.state.pool.connection() as conn:
        conn.execute("SELECT 1")
    return True


def create_app(
    settings: Settings | None = None,
    *,
    pool: ConnectionPool | None = None,
    backend: TaskBackend | None = None,
) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_pool = pool is None
        app.state.pool = pool or make_pool(
            settings.require_database_url(),
            min_size=settings.db_pool_min,
            max_size=settings.db_pool_max,
            name="api",
        )
        try:
            async with mcp_running():
                yield
        finally:
            if own_pool:
                app.state.pool.close()

    app = FastAPI(title="Memora API", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    checks = {"database": lambda: _db_check(app)}
    if backend is None:
        celery = create_celery(settings)
        backend = CeleryBackend(celery)
        broker = redis.Redis.from_url(settings.broker)
        checks["broker"] = lambda: bool(broker.ping())
        checks["workers"] = CachedCheck(lambda: bool(celery.control.ping(timeout=1.0)), ttl=5.0)
    app.state.backend = backend
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(health_router(checks))
    app.include_router(memories.router)
    app.include_router(agents.router)
    app.include_router(admin.router)
    app.include_router(simulation.router)
    install_metrics(app, "api", queue_depths="broker" in checks)
    if settings.query_url:
        app.include_router(proxy_router(settings.query_url))
    mcp_running = mcp_server.install(app)  # /mcp/{agent_id}
    return app
