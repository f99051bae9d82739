"""The write API: accepts content, makes it durable, enqueues the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis
from fastapi import FastAPI

from memora.config import Settings, get_settings
from memora.db.pool import Pool, make_pool
from memora.pipeline.backend import TaskBackend
from services.api.errors import BodySizeLimit, install_error_handlers
from services.api.health import CachedCheck, health_router
from services.api.metrics import install_metrics
from services.api.routes import admin, agents, memories


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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_pool = pool is None
        app.state.pool = pool or make_pool(
            settings.require_database_url(),
            min_size=settings.db_pool_min,
            max_size=settings.db_pool_max,
            name="api",
            row_security=settings.row_security,
        )
        try:
            yield
        finally:
            if own_pool:
                app.state.pool.close()

    app = FastAPI(title="Memora API", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    checks = {"database": lambda: _db_check(app)}
    if backend is None:
        from services.workers.celery_app import create_celery
        from services.workers.dispatch import CeleryBackend

        celery = create_celery(settings)
        backend = CeleryBackend(celery)
        broker = redis.Redis.from_url(settings.broker_url or "redis://127.0.0.1:6379/0")
        checks["broker"] = lambda: bool(broker.ping())
        checks["workers"] = CachedCheck(lambda: bool(celery.control.ping(timeout=1.0)), ttl=5.0)
    app.state.backend = backend
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(health_router(checks))
    app.include_router(memories.router)
    app.include_router(agents.router)
    app.include_router(admin.router)
    install_metrics(app, "api", queue_depths="broker" in checks)
    if settings.query_url:
        from services.api.proxy import proxy_router

        app.include_router(proxy_router(settings.query_url))
    return app
