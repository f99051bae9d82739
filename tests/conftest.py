"""Shared fixtures: the suite starts its own PostgreSQL+pgvector and Redis (never the machine's).

One database server per test session, migrated once; tests isolate themselves by agent_id.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memora.basics.config import Settings
from tests.fakes import (  # noqa: F401 - fixtures
    fake_llm,
    fake_llm_server,
    llm_inline_api,
    llm_settings,
)


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="memora-test-", dir=tempfile.gettempdir()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres(data_dir: Path) -> Iterator[Any]:
    from memora.db.migrate import upgrade
    from memora.infra.embedded import EmbeddedPostgres

    server = EmbeddedPostgres(data_dir / "pg")
    url = server.start()
    upgrade(url, 384)
    yield server
    server.stop(quiet=True)


@pytest.fixture(scope="session")
def pg_url(postgres: Any) -> str:
    return str(postgres.url)


@contextmanager
def own_database(pg_url: str, prefix: str, *, migrate: bool = True) -> Iterator[str]:
    """A new database on the suite's server (migrated to head unless told not to), dropped
    afterwards. For tests whose rows the suite's own must not see, or the other way round: the
    suite's beat reconciles every operation of the main database onto the suite's workers."""
    import psycopg
    from psycopg import sql

    from memora.db.migrate import upgrade

    server = pg_url.rsplit("/", 1)[0]
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    name = sql.Identifier(db)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    url = f"{server}/{db}"
    try:
        if migrate:
            upgrade(url, 384)
        yield url
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(name))


@contextmanager
def own_database_pool(pg_url: str, prefix: str) -> Iterator[tuple[str, Any]]:
    """`own_database` (migrated) with a small pool on it: (url, pool)."""
    from memora.db.pool import make_pool

    with own_database(pg_url, prefix) as url:
        pool = make_pool(url, min_size=1, max_size=4, name=prefix)
        try:
            yield url, pool
        finally:
            pool.close()


@pytest.fixture(scope="session")
def redis_server(data_dir: Path) -> Iterator[Any]:
    from memora.infra.embedded import EmbeddedRedis

    server = EmbeddedRedis(data_dir / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: Any) -> str:
    return str(redis_server.url)


@pytest.fixture(scope="session")
def cross_encoder_path(data_dir: Path) -> Path:
    from tests.fakes.cross_encoder import build_tiny_cross_encoder

    return build_tiny_cross_encoder(data_dir / "tiny-cross-encoder")


@pytest.fixture(scope="session")
def settings(pg_url: str, data_dir: Path, cross_encoder_path: Path) -> Settings:
    return Settings(
        database_url=pg_url,
        broker_url=None,
        data_dir=data_dir,
        llm_base_url=None,
        cross_encoder_model=str(cross_encoder_path),
    )


@pytest.fixture(scope="session")
def pool(pg_url: str) -> Iterator[Any]:
    from memora.db.pool import make_pool

    p = make_pool(pg_url, min_size=1, max_size=8, name="tests")
    yield p
    p.close()


@pytest.fixture(scope="session")
def pipeline(settings: Settings, pool: Any) -> Any:
    from memora.pipeline.runner import Pipeline

    return Pipeline(settings, pool)


@pytest.fixture()
def agent_id() -> str:
    return f"agent-{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def agent_conn(pool: Any, agent_id: str) -> Iterator[Any]:
    """A pooled connection, with the agent `agent_id` stored; afterwards its memories, entities
    and the agent itself are deleted."""
    with pool.connection() as conn:
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent_id,))
        conn.commit()
        yield conn
        for table in ("memory_units", "entities", "agents"):
            conn.execute(f"DELETE FROM {table} WHERE agent_id = %s", (agent_id,))
        conn.commit()


@pytest.fixture(scope="session")
def inline_api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    """The write API with stages run inline (no broker): fast, still real PostgreSQL."""
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    app = create_app(settings, pool=pool, backend=InlineBackend(pipeline))
    with TestClient(app) as client:
        yield client


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


WORKER_ENV = {
    "MEMORA_VISIBILITY_TIMEOUT": "10",
    "MEMORA_STUCK_AFTER_SECONDS": "8",
    "MEMORA_RECONCILE_INTERVAL_SECONDS": "2",
    "MEMORA_TASK_RETRY_BACKOFF_MAX": "4",
    "MEMORA_EXTRACTOR": "local",
    # the webhook tests' receiver listens on 127.0.0.1; retries and sweeps come quickly
    "MEMORA_WEBHOOK_ALLOW_PRIVATE": "true",
    "MEMORA_WEBHOOK_RETRY_BASE_SECONDS": "1",
    "MEMORA_WEBHOOK_SWEEP_INTERVAL_SECONDS": "1",
}


@pytest.fixture(scope="session")
def worker_stack(settings: Settings, redis_url: str, data_dir: Path) -> Iterator[Any]:
    """Real Celery worker processes (one per stage queue) and beat, on the suite's servers."""
    from services.cli.stack import Stack

    stack_settings = settings.model_copy(update={"broker_url": redis_url})
    stack = Stack(
        stack_settings,
        with_api=False,
        with_query=False,
        log_dir=data_dir / "worker-logs",
        extra_env=WORKER_ENV,
    )
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def celery_api(worker_stack: Any, pool: Any) -> Iterator[Any]:
    """The write API enqueueing to the real broker, served to the test client in-process."""
    from fastapi.testclient import TestClient

    from services.api.app import create_app

    app = create_app(worker_stack.settings, pool=pool)
    with TestClient(app) as client:
        yield client
