"""The query service (read pods): fused retrieval over the memory graph, and think.

It holds the embedding model and, when a search asks for it (or at start with
MEMORA_PRELOAD_CROSS_ENCODER), the cross-encoder; the write API loads neither.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from memora.basics import logs
from memora.basics.config import Settings, get_settings
from memora.db.pool import Pool, make_pool
from memora.lifecycle.memory import Memories
from memora.nlp.embedding import check_dimension, get_embedder
from memora.nlp.llm import LazyLLM, LLMClient
from memora.pipeline.handoff import TaskBackend
from memora.retrieval import Retriever
from memora.usecases.think import Thinker
from services.api.errors import BodySizeLimit, install_error_handlers
from services.api.health import health_router
from services.api.metrics import install_metrics
from services.api.routes import conversation_search, lifecycle, search, think
from services.api.upstream import install_upstream_handlers
from services.workers.celery_app import create_celery
from services.workers.dispatch import CeleryBackend

# A search holds one connection per retriever at most (keyword, semantic, graph during a
# filtered walk, temporal, entity); the results are read on one of them, released by then.
CONNECTIONS_PER_SEARCH = 5


def create_app(
    settings: Settings | None = None,
    *,
    pool: Pool | None = None,
    backend: TaskBackend | None = None,
) -> FastAPI:
    """The query service; `backend` receives the work think hands off (its opinions), by
    default the Celery queues of MEMORA_BROKER_URL."""
    settings = settings or get_settings()
    logs.configure(settings.log_format, settings.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_pool = pool is None
        app.state.pool = pool or make_pool(
            settings.require_database_url(),
            min_size=settings.db_pool_min,
            max_size=max(
                settings.db_pool_max, CONNECTIONS_PER_SEARCH * settings.search_concurrency + 2
            ),
            name="query",
            row_security=settings.row_security,
        )
        embedder = get_embedder(
            settings.embedding_model,
            settings.torch_threads,
            settings.embedding_batch_size,
            settings.embedding_backend,
            settings.model_cache_dir,
            settings.embedding_batch_wait_ms / 1000,
        )
        check_dimension(embedder, settings.embedding_dim)
        app.state.embedder = embedder
        app.state.retriever = Retriever(settings, app.state.pool, embedder)
        app.state.thinker = Thinker(
            app.state.pool, app.state.retriever, app.state.backend, app.state.llm
        )
        app.state.memories = Memories(
            settings,
            app.state.pool,
            embedder,
            LLMClient(settings) if settings.llm_configured else None,
        )
        if settings.preload_cross_encoder:
            await run_in_threadpool(app.state.retriever.cross_encoder)
        # The models are ~450k long-lived objects: a full garbage collection over them takes
        # ~150 ms, a pause in whichever search triggers it. Frozen, collections skip them.
        gc.freeze()
        try:
            yield
        finally:
            app.state.retriever.close()
            if own_pool:
                app.state.pool.close()

    app = FastAPI(title="Memora query service", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.backend = backend or CeleryBackend(create_celery(settings))
    app.state.llm = LazyLLM(settings)

    def db_ready() -> bool:
        with app.state.pool.connection() as conn:
            conn.execute("SELECT 1")
        return True

    install_error_handlers(app)
    install_upstream_handlers(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=1024 * 1024, drain_bytes=settings.max_body_drain_bytes
    )
    app.include_router(
        health_router({"database": db_ready, "embedder": lambda: hasattr(app.state, "embedder")})
    )
    app.include_router(search.router)
    app.include_router(think.router)
    app.include_router(conversation_search.router)
    app.include_router(lifecycle.router)
    install_metrics(app, "query")
    return app
