"""Prometheus metrics and a readiness heartbeat for Celery workers, through Celery's signals.

- Pool processes record task duration, successes, retries and failures (task_prerun/postrun/
  success/retry/failure), database pool use, embedding and LLM usage, and the lag from POST to
  searchable when an operation's last stage succeeds.
- The main process serves /metrics on MEMORA_WORKER_METRICS_PORT (started on worker_ready),
  adding up every pool process's values from PROMETHEUS_MULTIPROC_DIR; `memora worker` sets
  that directory up. It also touches a heartbeat file on every event heartbeat the consumer
  sends (every 2 s while it is connected to the broker): `memora worker-ready` checks its age.

One line in tasks.py: `worker_metrics.install(pool=lambda: pipeline().pool)`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery.exceptions import Retry
from celery.signals import (
    heartbeat_sent,
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    task_success,
    worker_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from prometheus_client import start_http_server
from psycopg_pool import ConnectionPool

from memora.basics import metrics
from memora.basics.config import get_settings
from memora.basics.stages import INGEST_STAGES
from memora.nlp import llm
from memora.store import operation_counts
from services.workers.probe import heartbeat_path
from services.workers.queues import TASK_PREFIX, task_operations

log = logging.getLogger("memora.worker.metrics")

_pool: Callable[[], ConnectionPool] | None = None
_started: dict[str, float] = {}
_heartbeat: dict[str, Any] = {"path": None, "touched": 0.0}
_server: list[Any] = []
LAST_STAGE_TASK = f"{TASK_PREFIX}{INGEST_STAGES[-1].value}"
HEARTBEAT_EVERY = 1.0  # seconds between two touches of the heartbeat file


def install(pool: Callable[[], ConnectionPool]) -> None:
    """`pool`: this process's database pool (for pool metrics and the lag query)."""
    global _pool
    _pool = pool
    metrics.install_llm_hook(llm.usage)


# ------------------------------------------------------------------------ pool processes
def _stage(task: Any) -> str:
    return str(getattr(task, "name", "") or "unknown").removeprefix(TASK_PREFIX)


def _queue(request: Any) -> str:
    info = getattr(request, "delivery_info", None) or {}
    return str(info.get("routing_key") or info.get("queue") or "unknown")


def _exception_name(exc: Any) -> str:
    return type(getattr(exc, "exc", None) or exc).__name__


@task_prerun.connect
def _on_prerun(task_id: str, task: Any, **_: Any) -> None:
    _started[task_id] = time.perf_counter()
    metrics.TASKS_IN_PROGRESS.labels(_stage(task)).inc()


@task_postrun.connect
def _on_postrun(task_id: str, task: Any, **_: Any) -> None:
    stage = _stage(task)
    metrics.TASKS_IN_PROGRESS.labels(stage).dec()
    started = _started.pop(task_id, None)
    if started is not None:
        elapsed = time.perf_counter() - started
        metrics.TASK_DURATION.labels(stage, _queue(task.request)).observe(elapsed)
    if _pool is not None:
        try:
            pool = _pool()
            metrics.record_pool(str(getattr(pool, "name", "worker")), pool.get_stats())
        except Exception as exc:  # metrics never fail a task
            log.debug("pool metrics: %s", exc)


@task_success.connect
def _on_success(sender: Any, result: Any = None, **_: Any) -> None:
    request = sender.request
    metrics.TASK_SUCCESSES.labels(_stage(sender), _queue(request)).inc()
    if sender.name == LAST_STAGE_TASK and result is None and request.args:
        backfill = bool((request.kwargs or {}).get("backfill"))
        for operation_id in task_operations(request.args[0]):
            _observe_lag(operation_id, backfill)


@task_retry.connect
def _on_retry(sender: Any, request: Any = None, reason: Any = None, **_: Any) -> None:
    count_retry(sender, request, reason)


def count_retry(task: Any, request: Any, reason: Any) -> None:
    """A retry of the task's work (also one operation of a batch task retried on its own)."""
    metrics.TASK_RETRIES.labels(_stage(task), _queue(request), _exception_name(reason)).inc()


@task_failure.connect
def _on_failure(sender: Any, exception: BaseException | None = None, **_: Any) -> None:
    if isinstance(exception, Retry):
        return
    stage, queue = _stage(sender), _queue(sender.request)
    metrics.TASK_FAILURES.labels(stage, queue, _exception_name(exception)).inc()


def _observe_lag(operation_id: str, backfill: bool) -> None:
    """POST -> completed, for an operation that completed just now (a redelivered last stage
    finds it completed long ago and is not counted twice)."""
    if _pool is None:
        return
    try:
        with _pool().connection() as conn:
            lag = operation_counts.completion_lag(conn, operation_id, within_seconds=60)
    except Exception as exc:
        log.debug("lag metric: %s", exc)
        return
    if lag is not None:
        metrics.observe_lag(lag, backfill=backfill)


@worker_process_shutdown.connect
def _on_process_shutdown(pid: int | None = None, **_: Any) -> None:
    metrics.mark_process_dead(pid or os.getpid())


# -------------------------------------------------------------------------- main process
@worker_init.connect
def _on_worker_init(sender: Any = None, **_: Any) -> None:
    directory = metrics.multiprocess_dir()
    if directory:
        removed = metrics.remove_stale_files(directory, keep_pid=os.getpid())
        if removed:
            log.info("removed %d stale metric files from %s", removed, directory)
    elif (getattr(sender, "concurrency", 1) or 1) > 1:
        log.warning(
            "PROMETHEUS_MULTIPROC_DIR is not set: /metrics shows the main process only, not "
            "its %s pool processes (start workers with `memora worker`)",
            sender.concurrency,
        )


@worker_ready.connect
def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    settings = get_settings()
    port = settings.worker_metrics_port
    if port and not _server:
        try:
            _server.append(start_http_server(port, registry=metrics.exposition_registry()))
            log.info("worker metrics on :%d/metrics", port)
        except OSError as exc:
            log.error("cannot serve worker metrics on port %d: %s", port, exc)
    path = heartbeat_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {"hostname": getattr(sender, "hostname", None), "pid": os.getpid()}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)
    _heartbeat.update(path=path, touched=time.monotonic())


@heartbeat_sent.connect
def _on_heartbeat(**_: Any) -> None:
    path = _heartbeat["path"]
    now = time.monotonic()
    if path is None or now - _heartbeat["touched"] < HEARTBEAT_EVERY:
        return
    _heartbeat["touched"] = now
    with contextlib.suppress(FileNotFoundError):
        os.utime(path)


@worker_shutdown.connect
def _on_worker_shutdown(**_: Any) -> None:
    path = _heartbeat["path"]
    _heartbeat["path"] = None
    if path is not None:
        Path(path).unlink(missing_ok=True)
    for server, _thread in _server:
        threading.Thread(target=server.shutdown, daemon=True).start()
    _server.clear()
