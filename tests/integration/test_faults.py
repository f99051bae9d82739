"""Faults on real components.

- PostgreSQL restarted under the write API and the query service: requests answer 503 JSON
  within seconds (no 500, no hang) while it is down, and succeed again once it is back, with
  no restart of the apps. A PostgreSQL server of its own, so the suite's is not disturbed.
- The embedding model failing to load: the query service and the workers refuse to start, with
  one clear line naming the model and the setting, instead of failing later in a request.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from memora.basics.config import Settings
from tests.conftest import own_database, own_database_pool

pytestmark = pytest.mark.integration

BAD_MODEL = "/nonexistent"
MODEL_ERROR = "cannot load embedding model '/nonexistent' (MEMORA_EMBEDDING_MODEL)"
DOWN_ANSWER_SECONDS = 10  # the pool waits 5 s for a connection, then the API answers 503


class RecordingBackend:
    """Takes the place of Celery: these tests are about the database, not the pipeline."""

    def __init__(self) -> None:
        self.enqueued: list[UUID] = []

    def enqueue(
        self,
        stage: Any,
        operation_id: UUID,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        self.enqueued.append(operation_id)


@pytest.fixture()
def own_postgres() -> Iterator[Any]:
    from memora.db.migrate import upgrade
    from memora.infra.embedded import EmbeddedPostgres

    data = Path(tempfile.mkdtemp(prefix="memora-faults-", dir=tempfile.gettempdir()))
    server = EmbeddedPostgres(data / "pg")
    upgrade(server.start(), 384)
    yield server
    server.stop(quiet=True)
    shutil.rmtree(data, ignore_errors=True)


def _timed(call: Any) -> tuple[Any, float]:
    t0 = time.monotonic()
    response = call()
    return response, time.monotonic() - t0


def _assert_unavailable(response: Any, elapsed: float) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "database_unavailable"
    assert elapsed < DOWN_ANSWER_SECONDS, f"took {elapsed:.1f}s"


def test_postgres_restart_gives_503_then_recovers_without_restarting_the_apps(
    own_postgres: Any, settings: Settings
) -> None:
    from fastapi.testclient import TestClient

    from memora.db.pool import make_pool
    from services.api import app as write_app
    from services.api import query_app

    s = settings.model_copy(update={"database_url": own_postgres.url})
    pool = make_pool(own_postgres.url, min_size=1, max_size=4, name="faults")
    backend = RecordingBackend()
    agent = "fault-agent"

    def batch(document_id: str) -> dict[str, Any]:
        return {
            "agent_id": agent,
            "document_id": document_id,
            "items": [{"content": f"Alice: I keep notes in document {document_id}."}],
        }

    try:
        with (
            TestClient(write_app.create_app(s, pool=pool, backend=backend)) as api,
            TestClient(query_app.create_app(s, pool=pool)) as query,
        ):
            before = api.post("/api/memories/batch", json=batch("before"))
            assert before.status_code == 200, before.text

            own_postgres.stop()
            response, elapsed = _timed(
                lambda: api.post("/api/memories/batch", json=batch("during"))
            )
            _assert_unavailable(response, elapsed)
            assert response.headers.get("retry-after")
            response, elapsed = _timed(
                lambda: query.post("/api/search", json={"agent_id": agent, "query": "notes"})
            )
            _assert_unavailable(response, elapsed)
            response, elapsed = _timed(lambda: api.get("/health/ready"))
            assert response.status_code == 503
            assert response.json()["checks"]["database"] is False
            assert elapsed < DOWN_ANSWER_SECONDS

            own_postgres.start()  # same port, same data
            deadline = time.monotonic() + 30
            while True:
                after = api.post("/api/memories/batch", json=batch("after"))
                if after.status_code == 200 or time.monotonic() > deadline:
                    break
                assert after.status_code == 503, after.text
                time.sleep(0.5)
            assert after.status_code == 200, after.text
            assert api.get("/health/ready").status_code == 200
            assert (
                query.post("/api/search", json={"agent_id": agent, "query": "notes"}).status_code
                == 200
            )
            listed = api.get(f"/api/agents/{agent}/documents").json()["documents"]
            assert sorted(d["document_id"] for d in listed) == ["after", "before"]
            assert api.get(f"/api/operations/{before.json()['operation_id']}").status_code == 200
            assert len(backend.enqueued) == 2  # nothing was enqueued for the refused batch
    finally:
        pool.close()


def test_query_service_and_pipeline_fail_clearly_without_their_model(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, pg_url: str
) -> None:
    """On a database of its own: the suite's records its model as the live embedding
    generation, which a process follows whatever its settings say (memora.pipeline.generation);
    a new database records the first process's."""
    from fastapi.testclient import TestClient

    from memora.pipeline.runner import Pipeline
    from services.api import query_app

    monkeypatch.setenv("MEMORA_EMBEDDING_MODEL", BAD_MODEL)
    with own_database_pool(pg_url, "faults_model") as (url, pool):
        bad = Settings(database_url=url, data_dir=settings.data_dir)
        assert bad.embedding_model == BAD_MODEL

        app = query_app.create_app(bad, pool=pool)
        with pytest.raises(RuntimeError, match=re.escape(MODEL_ERROR)), TestClient(app):
            pass  # the lifespan fails: no request is ever served

        with pytest.raises(RuntimeError) as failed:
            Pipeline(bad, pool).context.preload("embedder")
        assert str(failed.value) == f"{MODEL_ERROR}: no such directory {BAD_MODEL}"


def test_worker_and_query_processes_exit_at_start_without_their_model(
    settings: Settings, redis_url: str, pg_url: str
) -> None:
    with own_database(pg_url, "faults_processes") as url:
        _exit_at_start(url, redis_url)


def _exit_at_start(database_url: str, redis_url: str) -> None:
    from memora.infra.embedded import free_port

    env = dict(
        os.environ,
        MEMORA_DATABASE_URL=database_url,
        MEMORA_BROKER_URL=redis_url,
        MEMORA_EMBEDDING_MODEL=BAD_MODEL,
        MEMORA_PRELOAD="embedder",
        HF_HUB_OFFLINE="1",
    )
    worker = [
        *("celery", "-A", "services.workers.tasks", "worker", "-Q", "embed", "-c", "1"),
        *("-n", f"faults-{os.getpid()}@%h", "--without-mingle", "--without-gossip"),
    ]
    query = [
        *("uvicorn", "services.api.query_app:create_app", "--factory"),
        *("--host", "127.0.0.1", "--port", str(free_port())),
    ]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for args in (worker, query)
    ]
    try:
        texts = []
        for proc in processes:
            output, _ = proc.communicate(timeout=120)
            texts.append(output.decode(errors="replace"))
            assert proc.returncode != 0, texts[-1][-2000:]
            assert MODEL_ERROR in texts[-1], texts[-1][-2000:]
        assert f"memora worker cannot start: {MODEL_ERROR}" in texts[0]
        assert "Application startup failed" in texts[1]
    finally:
        for proc in processes:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
