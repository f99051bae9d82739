"""The periodic-job registry drives beat's schedule, the task routes and the job metrics."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from memora.basics.config import Settings
from memora.basics.stages import MAINTENANCE_QUEUE, WEBHOOKS_QUEUE
from memora.jobs import JOBS, JobContext, JobResult, JobSpec, run_job
from services.workers.celery_app import create_celery
from services.workers.queues import job_task_name, task_routes


def test_every_job_is_routed_to_its_queue_and_scheduled_by_its_interval() -> None:
    settings = Settings(reconcile_interval_seconds=7)
    schedule = create_celery(settings).conf.beat_schedule
    for name in JOBS:
        # the webhook sweep runs beside the deliveries, on their worker; the rest on maintenance
        queue = WEBHOOKS_QUEUE if name == "webhooks" else MAINTENANCE_QUEUE
        assert task_routes()[job_task_name(name)] == {"queue": queue}
    assert schedule["reconcile"] == {
        "task": "memora.reconcile",
        "schedule": 7,
        "options": {"expires": 7},
    }
    assert (
        "reconcile" not in create_celery(Settings(reconcile_interval_seconds=0)).conf.beat_schedule
    )


def _sample(name: str, label: str, suffix: str) -> float:
    value = REGISTRY.get_sample_value(f"memora_job_{name}{suffix}", {"job": label})
    return value or 0.0


def test_run_job_records_runs_examined_changed_and_failures() -> None:
    ok = JobSpec("probe_ok", lambda ctx: JobResult(examined=5, changed=2), lambda s: 0)
    ctx = JobContext(Settings(), pool=None, backend=None)  # type: ignore[arg-type]
    before = _sample("examined", "probe_ok", "_total")
    assert run_job(ok, ctx).changed == 2
    assert _sample("examined", "probe_ok", "_total") == before + 5
    assert _sample("changed", "probe_ok", "_total") >= 2

    def boom(ctx: Any) -> JobResult:
        raise RuntimeError("no database")

    failing = JobSpec("probe_fail", boom, lambda s: 0)
    with pytest.raises(RuntimeError):
        run_job(failing, ctx)
    failed = REGISTRY.get_sample_value(
        "memora_job_runs_total", {"job": "probe_fail", "outcome": "failed"}
    )
    assert failed == 1
