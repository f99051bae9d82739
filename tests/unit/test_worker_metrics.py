"""The worker's Celery signal handlers: durations, successes, retries, failures and lag, by
stage and queue (the real worker path is in tests/integration/test_operations.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from celery.exceptions import Retry
from prometheus_client import REGISTRY

from services.workers import metrics as worker_metrics


@pytest.fixture(autouse=True)
def _restore_pool() -> Iterator[None]:
    saved = worker_metrics._pool
    yield
    worker_metrics._pool = saved


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _task(name: str, queue: str, *args: Any, **kwargs: Any) -> Any:
    request = SimpleNamespace(
        delivery_info={"routing_key": queue, "exchange": ""}, args=list(args), kwargs=kwargs
    )
    return SimpleNamespace(name=name, request=request)


class _Conn:
    def __init__(self, row: dict[str, Any] | None) -> None:
        self.row, self.sql = row, ""

    def execute(self, sql: str, params: Any) -> Any:
        self.sql = sql
        return SimpleNamespace(fetchone=lambda: self.row)


class _Pool:
    name = "unit-worker"

    def __init__(self, row: dict[str, Any] | None) -> None:
        self.conn = _Conn(row)

    @contextmanager
    def connection(self) -> Iterator[_Conn]:
        yield self.conn

    def get_stats(self) -> dict[str, int]:
        return {"pool_size": 2, "pool_available": 1, "pool_max": 4, "requests_waiting": 0}


def test_duration_success_and_pool_use_by_stage_and_queue() -> None:
    worker_metrics.install(pool=lambda: _Pool(None))  # type: ignore[arg-type,return-value]
    task = _task("memora.embed", "embed.backfill", "op-1", backfill=True)
    labels = {"stage": "embed", "queue": "embed.backfill"}
    before = _value("memora_task_duration_seconds_count", **labels)
    successes = _value("memora_task_successes_total", **labels)
    worker_metrics._on_prerun(task_id="t1", task=task)
    assert _value("memora_tasks_in_progress", stage="embed") >= 1
    worker_metrics._on_success(sender=task, result="entities")
    worker_metrics._on_postrun(task_id="t1", task=task)
    assert _value("memora_task_duration_seconds_count", **labels) == before + 1
    assert _value("memora_task_successes_total", **labels) == successes + 1
    assert _value("memora_db_pool_connections", pool="unit-worker", state="in_use") == 1


def test_retries_and_failures_are_counted_by_exception() -> None:
    task = _task("memora.extract", "extract", "op-2")
    labels = {"stage": "extract", "queue": "extract"}
    retried = _value("memora_task_retries_total", **labels, exception="ConnectionError")
    worker_metrics._on_retry(
        sender=task, request=task.request, reason=Retry(exc=ConnectionError("db"))
    )
    assert _value("memora_task_retries_total", **labels, exception="ConnectionError") == (
        retried + 1
    )
    failed = _value("memora_task_failures_total", **labels, exception="ValueError")
    worker_metrics._on_failure(sender=task, exception=Retry())  # a retry is not a failure
    worker_metrics._on_failure(sender=task, exception=ValueError("bad"))
    assert _value("memora_task_failures_total", **labels, exception="ValueError") == failed + 1


def test_lag_is_observed_when_the_last_stage_completes_an_operation() -> None:
    pool = _Pool({"lag": 3.5})
    worker_metrics.install(pool=lambda: pool)  # type: ignore[arg-type,return-value]
    before = _value("memora_ingest_lag_seconds_count", priority="live")
    worker_metrics._on_success(
        sender=_task("memora.index_messages", "index_messages", "op-3"), result=None
    )
    assert _value("memora_ingest_lag_seconds_count", priority="live") == before + 1
    assert "status = 'completed'" in pool.conn.sql
    # not the last stage, or the operation was not completed just now: nothing observed
    worker_metrics._on_success(sender=_task("memora.entities", "entities", "op-3"), result=None)
    pool.conn.row = None
    worker_metrics._on_success(sender=_task("memora.links", "links", "op-4"), result=None)
    assert _value("memora_ingest_lag_seconds_count", priority="live") == before + 1
