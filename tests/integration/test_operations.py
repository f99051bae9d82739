"""Operations on real components: /metrics moving after an ingest (API, query service, Celery
workers), health and readiness endpoints, the worker readiness probe, `memora status`, and a
prefork `memora worker` whose pool processes' metrics add up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from tests.conftest import wait_until
from tests.integration.metrics_support import scrape, value, worker_metrics

pytestmark = pytest.mark.integration
MEMORA = str(Path(sys.executable).parent / "memora")


def _items(n: int, seed: int) -> list[dict[str, Any]]:
    return [
        {
            "content": f"Maya: I met Lena in Pittsburgh to plan trip {seed}-{i}.",
            "event_date": "2024-05-02T10:00:00Z",
        }
        for i in range(n)
    ]


@pytest.fixture()
def api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[TestClient]:
    """The write API, inline pipeline, without caching of the scrape-time gauges."""
    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    s = settings.model_copy(update={"metrics_cache_seconds": 0})
    with TestClient(create_app(s, pool=pool, backend=InlineBackend(pipeline))) as client:
        yield client


def test_api_metrics_move_after_an_ingest(api: TestClient, agent_id: str) -> None:
    before = scrape(api.get("/metrics").text)
    body = {"agent_id": agent_id, "document_id": "m-1", "items": _items(3, 1)}
    assert api.post("/api/memories/batch", json=body).json()["status"] == "created"
    assert api.post("/api/memories/batch", json=body).json()["status"] == "unchanged"
    after = scrape(api.get("/metrics").text)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = {"service": "api", "route": "/api/memories/batch", "status": "200"}
    assert delta("memora_http_requests_total", **route) == 2
    assert delta("memora_http_request_duration_seconds_count", **route) == 2
    assert delta("memora_ingest_documents_total", outcome="created", priority="live") == 1
    assert delta("memora_ingest_documents_total", outcome="unchanged", priority="live") == 1
    assert delta("memora_ingest_items_total", outcome="created", priority="live") == 3
    # the inline pipeline embedded the three turns in this process
    assert delta("memora_embedding_texts_total") >= 3
    assert delta("memora_embedding_batch_size_count") >= 1
    assert value(after, "memora_operations", status="completed") >= 1
    assert value(after, "memora_db_pool_connections", pool="tests", state="max") == 8


def test_health_endpoints(api: TestClient, settings: Settings, pool: Any) -> None:
    from services.api import query_app
    from services.api.app import create_app

    assert api.get("/health/live").json() == {"status": "alive"}
    ready = api.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": True}

    with TestClient(query_app.create_app(settings, pool=pool)) as query:
        assert query.get("/health/live").status_code == 200
        ready = query.get("/health/ready")
        assert ready.status_code == 200, ready.json()
        assert ready.json()["checks"] == {"database": True, "embedder": True}
        search = query.post("/api/search", json={"agent_id": "nobody", "query": "trips"})
        assert search.status_code == 200
        samples = scrape(query.get("/metrics").text)
        assert (
            value(samples, "memora_http_requests_total", service="query", route="/api/search") >= 1
        )
        assert value(samples, "memora_db_pool_connections", pool="tests", state="size") >= 1

    # a broker that cannot be reached: still ready (batches stay durable and the reconciler
    # enqueues them later), the broker reported beside the checks
    down = settings.model_copy(update={"broker_url": f"redis://127.0.0.1:{free_port()}/0"})
    with TestClient(create_app(down, pool=pool)) as write:
        ready = write.get("/health/ready")
        assert ready.status_code == 200, ready.json()
        assert ready.json()["checks"] == {"database": True}
        assert ready.json()["informational"] == {"broker": False}
        assert write.get("/health/live").status_code == 200
        assert write.get("/metrics").status_code == 200  # still answers while Redis is down


def test_worker_metrics_move_and_workers_report_ready(
    celery_api: Any, worker_stack: Any, agent_id: str
) -> None:
    workers = ("extract", "embed", "links", "index_messages")
    before = {name: worker_metrics(worker_stack, name) for name in workers}
    body = {"agent_id": agent_id, "document_id": "w-1", "items": _items(4, 2)}
    op_id = celery_api.post("/api/memories/batch", json=body).json()["operation_id"]
    wait_until(
        lambda: celery_api.get(f"/api/operations/{op_id}").json()["status"] == "completed", 120
    )

    def delta(worker: str, name: str, **labels: str) -> float:
        after = worker_metrics(worker_stack, worker)
        return value(after, name, **labels) - value(before[worker], name, **labels)

    wait_until(
        lambda: delta("index_messages", "memora_ingest_lag_seconds_count", priority="live") >= 1,
        10,
    )
    labels = {"stage": "extract", "queue": "extract"}
    got = {k: v for k, v in worker_metrics(worker_stack, "extract").items() if "task_" in k[0]}
    was = {k: v for k, v in before["extract"].items() if "task_" in k[0]}
    assert delta("extract", "memora_task_successes_total", **labels) >= 1, (
        got,
        was,
        celery_api.get(f"/api/operations/{op_id}").json(),
    )
    assert delta("extract", "memora_task_duration_seconds_count", **labels) >= 1
    assert delta("embed", "memora_embedding_texts_total") >= 4
    assert delta("links", "memora_task_successes_total", stage="links") >= 1
    embed = worker_metrics(worker_stack, "embed")
    assert value(embed, "memora_db_pool_connections", pool="worker", state="max") >= 4

    heartbeats = worker_stack.settings.data_dir / "heartbeats"
    for name in worker_stack.workers:
        probe = _probe(heartbeats / f"{name}.heartbeat")
        assert probe.returncode == 0, probe.stdout
    assert _probe(heartbeats / "nobody.heartbeat").returncode == 1
    stale = _probe(heartbeats / "extract.heartbeat", "--max-age", "0")
    assert stale.returncode == 1 and "last heartbeat" in stale.stdout


def _probe(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MEMORA, "worker-ready", "--heartbeat-file", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_status_shows_queue_depths_and_operations(
    redis_server: Any, pg_url: str, api: TestClient, agent_id: str
) -> None:
    api.post(
        "/api/memories/batch",
        json={"agent_id": agent_id, "document_id": "s-1", "items": _items(1, 3)},
    )
    url = f"redis://127.0.0.1:{redis_server.port}/7"  # a database no worker consumes
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.rpush("extract.backfill", "a", "b")
    client.rpush("extract.backfill\x06\x169", "c")  # a priority sub-list of the same queue
    env = dict(os.environ, MEMORA_DATABASE_URL=pg_url, MEMORA_BROKER_URL=url)
    out = subprocess.run(
        [MEMORA, "status", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["queues"]["extract.backfill"] == 3 and status["queues"]["extract"] == 0
    assert status["operations"]["by_status"]["completed"] >= 1
    assert status["errors"] == {}
    table = subprocess.run([MEMORA, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert "extract.backfill" in table.stdout and "completed" in table.stdout
    client.flushdb()


def test_prefork_worker_metrics_add_up_over_its_pool_processes(
    redis_server: Any, pg_url: str, tmp_path: Path
) -> None:
    """`memora worker -c 2`: tasks run in two pool processes; the main process's /metrics
    shows their sum (prometheus multiprocess mode), and its heartbeat makes it ready."""
    from services.workers.celery_app import create_celery

    broker = f"redis://127.0.0.1:{redis_server.port}/8"
    redis.Redis.from_url(broker).flushdb()
    port, queue = free_port(), f"opstest-{uuid.uuid4().hex[:6]}"
    heartbeat = tmp_path / "worker.heartbeat"
    env = dict(
        os.environ,
        MEMORA_DATABASE_URL=pg_url,
        MEMORA_BROKER_URL=broker,
        MEMORA_DATA_DIR=str(tmp_path),
        MEMORA_WORKER_HEARTBEAT_FILE=str(heartbeat),
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    worker = subprocess.Popen(
        [
            MEMORA,
            "worker",
            "-Q",
            queue,
            "-c",
            "2",
            "--metrics-port",
            str(port),
            "-n",
            f"{queue}@%h",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: _probe(heartbeat).returncode == 0, 120, interval=1)
        celery = create_celery(Settings(broker_url=broker))
        for _ in range(12):  # unknown operations: each task ends at once, successfully
            celery.send_task("memora.extract", args=[str(uuid.uuid4())], queue=queue)
        labels = {"stage": "extract", "queue": queue}

        def done() -> float:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            return value(scrape(text), "memora_task_successes_total", **labels)

        wait_until(lambda: done() == 12, 120, interval=0.5)
        pids = {p.name.rsplit("_", 1)[-1] for p in (tmp_path / "metrics").rglob("counter_*.db")}
        assert len(pids) >= 2, pids  # the pool processes wrote their own files
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert not heartbeat.exists()  # removed at shutdown: not ready
