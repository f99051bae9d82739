"""The whole stack as `memora serve` runs it: once the write API answers /health/ready, what a
script does next works at once (no 503 from the query service behind it, no task waiting for a
worker that is still loading its models), and every worker loaded its models before it took
work."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from tests.conftest import wait_until

pytestmark = pytest.mark.integration

MODELS = {"extract": "nlp", "embed": "embedder", "entities": "nlp", "index_messages": "embedder"}


@pytest.fixture(scope="module")
def served(settings: Settings, redis_url: str, data_dir: Path) -> Iterator[Any]:
    from services.cli.stack import Stack

    s = settings.model_copy(
        update={
            "broker_url": redis_url.rsplit("/", 1)[0] + "/6",
            "data_dir": data_dir / "served",
            "port": free_port(),
            "query_port": free_port(),
        }
    )
    stack = Stack(s, with_beat=False, log_dir=data_dir / "served-logs")
    try:
        stack.start()
        stack.wait_ready()
        yield stack
    finally:
        stack.stop()


def test_after_ready_the_first_requests_succeed(served: Any) -> None:
    base = f"http://{served.settings.host}:{served.settings.port}"
    ready = httpx.get(f"{base}/health/ready").json()
    assert ready["checks"] == {"database": True, "query_service": True, "workers": True}
    search = httpx.post(f"{base}/api/search", json={"agent_id": "first-hour", "query": "Kyoto"})
    assert search.status_code == 200, search.text
    batch = {"agent_id": "first-hour", "items": [{"content": "Maya is planning a trip to Kyoto."}]}
    accepted = httpx.post(f"{base}/api/memories/batch", json=batch)
    assert accepted.status_code == 200, accepted.text
    operation = f"{base}/api/operations/{accepted.json()['operation_id']}"

    def finished() -> str | None:
        status = httpx.get(operation).json()["status"]
        return status if status in ("completed", "failed") else None

    assert wait_until(finished, 60, 0.2) == "completed"
    found = httpx.post(f"{base}/api/search", json={"agent_id": "first-hour", "query": "Kyoto"})
    assert any("Kyoto" in r["text"] for r in found.json()["results"])


def test_each_worker_loaded_its_models_before_it_took_work(served: Any, data_dir: Path) -> None:
    for worker, model in MODELS.items():
        log = (data_dir / "served-logs" / f"worker-{worker}.log").read_text()
        loading = re.search(r"loading models before taking work: (\S+)", log)
        ready = re.search(r"@\S+ ready\.", log)
        assert loading and ready, f"{worker}: {log[-2000:]}"
        assert model in loading.group(1).split(",")
        assert loading.start() < ready.start(), worker
