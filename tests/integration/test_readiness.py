"""Readiness per service, worker health as its own probe and metric, and the query proxy
passing upstream headers through.

- The write API stays ready without workers and without the broker (it accepts durable
  content either way); `/health/workers` and `memora_workers_answering` follow real Celery
  worker processes, started and SIGKILLed here.
- `/health/stack` (and `/health/ready` under MEMORA_READY_SCOPE=stack, as `memora serve` runs
  it) waits for a worker on every stage queue and for the query service; a worker answers only
  once its models are loaded. Under the whole stack, the first requests after ready succeed.
- Through the write API's forwarding, a 429 of the real query service keeps its Retry-After.

A Redis database of their own (not /0) keeps these workers apart from the suite's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from tests.conftest import wait_until
from tests.integration.metrics_support import scrape, value

pytestmark = pytest.mark.integration


@pytest.fixture()
def private_broker(redis_url: str) -> str:
    return redis_url.rsplit("/", 1)[0] + "/7"


def _workers(client: TestClient) -> tuple[int, int, float]:
    probe = client.get("/health/workers")
    gauge = value(scrape(client.get("/metrics").text), "memora_workers_answering")
    return probe.status_code, int(probe.json()["workers"]), gauge


def test_write_api_is_ready_without_workers_and_worker_health_follows_them(
    settings: Settings, pool: Any, private_broker: str, data_dir: Path
) -> None:
    from services.api.app import create_app
    from services.cli.stack import Stack

    s = settings.model_copy(update={"broker_url": private_broker})
    with TestClient(create_app(s, pool=pool)) as api:
        ready = api.get("/health/ready")
        assert ready.status_code == 200, ready.json()
        assert ready.json()["checks"] == {"database": True}  # the pod itself (Kubernetes)
        assert ready.json()["informational"] == {"broker": True}
        assert _workers(api) == (503, 0, 0.0)
        body = {"agent_id": "no-workers-yet", "items": [{"content": "Alice moved to Lisbon."}]}
        assert api.post("/api/memories/batch", json=body).status_code == 200

        stack = Stack(
            s,
            workers={"opinions": ["opinions"]},
            extra_env={"MEMORA_PRELOAD": "none"},  # loads no model: starts in seconds
            with_api=False,
            with_query=False,
            with_beat=False,
            log_dir=data_dir / "readiness-logs",
        )
        stack.start()
        try:
            up = wait_until(lambda: (w := _workers(api))[0] == 200 and w, timeout=90, interval=1)
            assert up == (200, 1, 1.0)
            os.killpg(stack.processes["worker-opinions"].pid, signal.SIGKILL)
            down = wait_until(lambda: (w := _workers(api))[0] == 503 and w, timeout=30, interval=1)
            assert down == (503, 0, 0.0)
            assert api.get("/health/ready").status_code == 200  # still taking writes
            # `memora serve` (and the chaos scenario) start a worker that exited again
            killed = stack.processes["worker-opinions"].pid
            assert stack.revive_workers() == ["worker-opinions"]
            assert stack.processes["worker-opinions"].pid != killed
            back = wait_until(lambda: (w := _workers(api))[0] == 200 and w, timeout=90, interval=1)
            assert back == (200, 1, 1.0)
            assert stack.revive_workers() == []  # alive: left alone
        finally:
            stack.stop()
        assert stack.revive_workers() == []  # a stopped stack starts nothing


def test_stack_readiness_waits_for_a_worker_on_every_stage_queue(
    settings: Settings, pool: Any, private_broker: str, data_dir: Path
) -> None:
    from services.api.app import create_app
    from services.cli.stack import Stack

    s = settings.model_copy(
        update={"broker_url": private_broker, "ready_scope": "stack", "ready_queues": "links"}
    )
    with TestClient(create_app(s, pool=pool)) as api:
        for path in ("/health/ready", "/health/stack"):
            waiting = api.get(path)
            assert waiting.status_code == 503, waiting.json()
            assert waiting.json()["checks"] == {"database": True, "workers": False}
            assert "no worker consumes links" in waiting.json()["errors"]["workers"]
        stack = Stack(
            s,
            workers={"links": ["links"]},
            with_api=False,
            with_query=False,
            with_beat=False,
            log_dir=data_dir / "stack-readiness-logs",
        )
        stack.start()
        try:
            ready = wait_until(
                lambda: (r := api.get("/health/ready")).status_code == 200 and r, 90, 0.5
            )
            assert ready.json()["checks"] == {"database": True, "workers": True}
            assert api.get("/health/stack").status_code == 200
        finally:
            stack.stop()


def test_the_default_readiness_is_the_pods_own_and_stack_readiness_is_its_own_probe(
    settings: Settings, pool: Any, private_broker: str
) -> None:
    """Kubernetes: a write API pod stays in service while no worker or query pod answers;
    `/health/stack` says what a request through it still lacks."""
    from services.api.app import create_app

    s = settings.model_copy(
        update={"broker_url": private_broker, "query_url": f"http://127.0.0.1:{free_port()}"}
    )
    with TestClient(create_app(s, pool=pool)) as api:
        assert api.get("/health/ready").json()["checks"] == {"database": True}
        stack = api.get("/health/stack")
    assert stack.status_code == 503
    assert stack.json()["checks"] == {"database": True, "query_service": False, "workers": False}
    assert "does not answer" in stack.json()["errors"]["query_service"]
    assert "no worker consumes extract, embed" in stack.json()["errors"]["workers"]


def test_write_api_is_ready_and_accepts_content_with_the_broker_down(
    settings: Settings, pool: Any
) -> None:
    from services.api.app import create_app

    down = settings.model_copy(update={"broker_url": f"redis://127.0.0.1:{free_port()}/0"})
    with TestClient(create_app(down, pool=pool)) as api:
        ready = api.get("/health/ready")
        assert ready.status_code == 200, ready.json()
        assert ready.json()["informational"] == {"broker": False}
        body = {"agent_id": "broker-down", "items": [{"content": "Bob adopted a rescue dog."}]}
        accepted = api.post("/api/memories/batch", json=body)
        assert accepted.status_code == 200, accepted.text
        assert api.get("/health/workers").status_code == 503


@pytest.fixture(scope="module")
def rate_limited_query(
    settings: Settings, redis_url: str, data_dir: Path, cross_encoder_path: Path
) -> Iterator[str]:
    """The real query service, limited to one request a minute per client."""
    from services.cli.stack import Stack

    stack = Stack(
        settings.model_copy(update={"broker_url": redis_url, "query_port": free_port()}),
        workers={},
        with_api=False,
        with_beat=False,
        log_dir=data_dir / "proxy-logs",
        extra_env={
            "MEMORA_RATE_LIMIT": "1/minute",
            "MEMORA_RATE_LIMIT_STORAGE_URL": "memory://",
            "MEMORA_CROSS_ENCODER_MODEL": str(cross_encoder_path),
        },
    )
    stack.start()
    try:
        stack.wait_ready(timeout=180)
        yield f"http://127.0.0.1:{stack.settings.query_port}"
    finally:
        stack.stop()


def test_the_query_proxy_passes_upstream_headers_through(
    rate_limited_query: str, settings: Settings, pool: Any, pipeline: Any
) -> None:
    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    s = settings.model_copy(update={"query_url": rate_limited_query})
    search = {"agent_id": "nobody-here", "query": "trips to Lisbon"}
    with TestClient(create_app(s, pool=pool, backend=InlineBackend(pipeline))) as api:
        first = api.post("/api/search", json=search)
        assert first.status_code == 200, first.text
        limited = api.post("/api/search", json=search)
        direct = httpx.post(f"{rate_limited_query}/api/search", json=search)
    assert direct.status_code == 429
    assert limited.status_code == 429, limited.text
    assert limited.json()["error"]["code"] == "rate_limited"
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.headers["content-type"] == direct.headers["content-type"]
    assert "transfer-encoding" not in limited.headers


def test_the_query_proxy_answers_503_with_retry_after_when_the_service_is_down(
    settings: Settings, pool: Any, pipeline: Any
) -> None:
    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    s = settings.model_copy(update={"query_url": f"http://127.0.0.1:{free_port()}"})
    with TestClient(create_app(s, pool=pool, backend=InlineBackend(pipeline))) as api:
        response = api.post("/api/search", json={"agent_id": "a", "query": "q"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "query_service_unavailable"
    assert response.headers["retry-after"] == "5"
