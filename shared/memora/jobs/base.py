"""Periodic jobs: what a job is given and what it reports.

A job is a module of `memora.jobs` with a function `run(ctx) -> JobResult`, registered in
`memora.jobs.JOBS` with how often beat runs it. Every job is idempotent, bounded per run (it
examines at most its batch of rows and leaves the rest to the next run) and so resumable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import ConnectionPool

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.stages import MAINTENANCE_QUEUE
from memora.pipeline.handoff import TaskBackend

log = logging.getLogger("memora.jobs")


@dataclass(frozen=True)
class JobContext:
    settings: Settings
    pool: ConnectionPool[Any]
    backend: TaskBackend
    agent_key: str | None = None  # one agent's stored key, or None for every agent


@dataclass
class JobResult:
    examined: int = 0  # rows (operations, memories, links…) the run looked at
    changed: int = 0  # rows it changed
    details: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec:
    name: str
    run: Callable[[JobContext], JobResult]
    interval_seconds: Callable[[Settings], float]  # beat's period; 0 or less: not scheduled
    description: str = ""
    queue: str = MAINTENANCE_QUEUE  # where beat sends its runs


def run_job(spec: JobSpec, ctx: JobContext) -> JobResult:
    """Run one job now, with its metrics (runs by outcome, examined, changed, duration)."""
    started = time.perf_counter()
    try:
        result = spec.run(ctx)
    except Exception:
        metrics.observe_job(spec.name, "failed", time.perf_counter() - started, 0, 0)
        raise
    seconds = time.perf_counter() - started
    metrics.observe_job(spec.name, "ok", seconds, result.examined, result.changed)
    log.info(
        "job done",
        extra={
            "job": spec.name,
            "agent": ctx.agent_key,
            "examined": result.examined,
            "changed": result.changed,
            "seconds": round(seconds, 3),
            **result.details,
        },
    )
    return result
