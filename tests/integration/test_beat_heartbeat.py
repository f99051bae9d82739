"""Beat's heartbeat: scheduled on the maintenance queue, run by a real worker, stamped in the
broker's Redis, and exported by the write API as memora_beat_last_heartbeat_timestamp_seconds
(which MemoraBeatHeartbeatStale watches)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.basics.stages import MAINTENANCE_QUEUE
from memora.pipeline.monitoring import BEAT_HEARTBEAT_KEY, beat_heartbeat, record_beat_heartbeat
from services.api.app import create_app
from services.workers.celery_app import create_celery
from services.workers.queues import job_task_name, task_routes
from services.workers.tasks import JOB_TASKS
from tests.conftest import wait_until

pytestmark = pytest.mark.integration
HEARTBEAT_TASK = job_task_name("beat_heartbeat")
METRIC = "memora_beat_last_heartbeat_timestamp_seconds"


def _gauge(client: TestClient) -> float:
    lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith(METRIC)]
    (line,) = lines
    return float(line.split()[-1])


def test_beat_schedules_the_heartbeat_on_the_maintenance_queue() -> None:
    celery = create_celery(Settings(beat_heartbeat_seconds=7))
    entry = celery.conf.beat_schedule["beat_heartbeat"]
    assert entry["task"] == HEARTBEAT_TASK and entry["schedule"] == 7
    assert entry["options"]["expires"] == 7  # a heartbeat that waited an interval is dropped
    assert task_routes()[HEARTBEAT_TASK] == {"queue": MAINTENANCE_QUEUE}
    assert JOB_TASKS["beat_heartbeat"].name == HEARTBEAT_TASK  # registered with the workers


def test_write_api_exports_the_last_heartbeat(
    settings: Settings, redis_url: str, pool: Any
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.delete(BEAT_HEARTBEAT_KEY)
    assert beat_heartbeat(client) is None
    app = create_app(
        settings.model_copy(update={"broker_url": redis_url, "metrics_cache_seconds": 0}), pool=pool
    )
    with TestClient(app) as api:
        # 0 in a fresh process, else the last stamp an earlier test's heartbeat left (seconds
        # ago, or a moment from now): this one comes after it
        before = _gauge(api)
        stamp = record_beat_heartbeat(client, now=max(time.time() - 5, before + 1))
        assert beat_heartbeat(client) == stamp
        assert _gauge(api) == pytest.approx(stamp) and stamp > before
        client.delete(BEAT_HEARTBEAT_KEY)  # a flushed broker: the last stamp stays, and ages
        assert _gauge(api) == pytest.approx(stamp)


def test_a_worker_runs_the_heartbeat_beat_sends(worker_stack: Any) -> None:
    client = redis.Redis.from_url(worker_stack.settings.broker_url)
    client.delete(BEAT_HEARTBEAT_KEY)
    celery = create_celery(worker_stack.settings)
    sent = time.time()
    celery.send_task(HEARTBEAT_TASK, **celery.conf.beat_schedule["beat_heartbeat"]["options"])
    stamp = wait_until(lambda: beat_heartbeat(client), timeout=60)
    assert sent <= stamp <= time.time()
