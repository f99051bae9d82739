"""The query service (read pods): fused retrieval over the memory graph, and think.

It holds the embedding model and, when a search asks for it (or at start with
MEMORA_PRELOAD_CROSS_ENCODER), the cross-encoder; the write API loads neither.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from starlette.middleware.gzip import GZipMiddleware

from memora.basics import logs, metrics
from memora.basics.config import Settings, get_settings, report_environment
from memora.db.pool import Pool, make_pool
from memora.nlp.embedding import check_dimension, embedder_for
from memora.nlp.llm import LazyLLM
from memora.pipeline.context import AppContext
from memora.pipeline.generation import Follower
from memora.pipeline.handoff import TaskBackend
from memora.retrieval import Retriever, pool_size_for
from memora.retrieval.calibration import calibration_for
from memora.store import generations
from memora.store.units import schema_embedding_dim
from services.api.errors import BodySizeLimit, install_error_handlers
from services.api.health import health_router
from services.api.metrics import install_metrics
from services.api.reads import Reads, ReadSide, build_reads, replica_pool
from services.api.routes import conversation_search, lifecycle, search, think
from services.api.tracing import install_tracing
from services.api.upstream import install_upstream_handlers
from services.workers.celery_app import create_celery
from services.workers.dispatch import CeleryBackend


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
    report_environment()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.pool = pool or _pool(settings)
        app.state.read_pool = replica_pool(settings)
        _read_path(app, settings)
        if settings.preload_cross_encoder:
            await run_in_threadpool(app.state.retriever.cross_encoder)
        # The models are hundreds of thousands of long-lived objects: a full garbage
        # collection over them is a pause in whichever search triggers it
        # (docs/benchmarks-history.md, "Search latency"). Frozen, collections skip them.
        gc.freeze()
        try:
            yield
        finally:
            app.state.reads.close()
            app.state.retriever.close()
            if pool is None:
                app.state.pool.close()

    app = FastAPI(title="Memora query service", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.backend = backend or CeleryBackend(create_celery(settings))
    app.state.llm = LazyLLM(settings)
    install_error_handlers(app)
    install_upstream_handlers(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=1024 * 1024, drain_bytes=settings.max_body_drain_bytes
    )
    # compressed when the client asks, as the write API's answers: the Ingress sends searches
    # here directly, and a forwarded answer passes the write API as it is
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    ready = {"database": lambda: _db_ready(app), "embedder": lambda: hasattr(app.state, "embedder")}
    app.include_router(health_router(ready))
    for module in (search, think, conversation_search, lifecycle):
        app.include_router(module.router)
    install_metrics(app, "query")
    install_tracing(app, "memora-query")
    return app


def _pool(settings: Settings) -> Pool:
    return make_pool(
        settings.require_database_url(),
        min_size=settings.db_pool_min,
        max_size=max(settings.db_pool_max, pool_size_for(settings)),
        name="query",
        row_security=settings.row_security,
    )


def _read_path(app: FastAPI, settings: Settings) -> None:
    """The embedder, the retriever and the use cases over them, on `app.state` (the routes'
    dependencies: services.api.deps), and the read routes' side: the same on the read replica
    when there is one (services.api.reads). The embedder is the live embedding generation's
    model (memora.pipeline.generation); a search that a `memora reembed` switch overtakes
    builds them all again for the new one (`_renew`) and runs again."""
    configured, state = settings, app.state
    follower = Follower(configured)
    with state.pool.connection() as conn:
        follower.follow(conn)
        s = follower.settings
        state.embedder = embedder_for(s, s.embedding_batch_wait_ms / 1000, queries=True)
        check_dimension(state.embedder, schema_embedding_dim(conn) or s.embedding_dim)
    metrics.record_query_embedding(state.embedder.model_name, state.embedder.query_precision)
    if s.conversation_index:  # a model outside the table is fitted now, not on a first search
        calibration_for(state.embedder, s.conversation_score_calibration)
    generation = follower.live.id if follower.live is not None else None
    state.retriever = Retriever(s, state.pool, state.embedder, generation=generation)
    state.context = AppContext(
        configured, state.pool, state.backend, llm=state.llm, embedder=state.embedder
    )
    side = ReadSide(state.retriever, state.context)
    state.reads = build_reads(s, side, state.read_pool, renew=lambda stale: _renew(app, stale))


_renewing = threading.Lock()


def _renew(app: FastAPI, stale: Reads) -> Reads | None:
    """The read side for the live embedding generation, when another than `stale`'s is live
    (None: it is not, the read's error was another); the old retrievers closed once their
    searches end."""
    with _renewing:
        state = app.state
        if state.reads is not stale:  # another search renewed it already
            return state.reads
        with state.pool.connection() as conn:
            live = generations.live(conn, state.settings)
        if live.id == state.retriever.generation:
            return None
        old = state.retriever
        _read_path(app, state.settings)
        threading.Thread(target=_close, args=(old, stale), daemon=True).start()
        return state.reads


def _close(retriever: Retriever, reads: Reads) -> None:
    reads.close(pool=False)
    retriever.close()


def _db_ready(app: FastAPI) -> bool:
    with app.state.pool.connection() as conn:
        conn.execute("SELECT 1")
    return True
