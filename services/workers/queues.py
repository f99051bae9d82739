"""Celery task names and routing, named once: the API and the workers both import this."""

from __future__ import annotations

from memora.basics.stages import MAINTENANCE_QUEUE, Stage
from memora.jobs import JOBS

TASK_PREFIX = "memora."


def task_name(stage: Stage) -> str:
    return f"{TASK_PREFIX}{stage.value}"


def job_task_name(job: str) -> str:
    """A periodic job's task (`memora.reconcile`, …), on the maintenance queue."""
    return f"{TASK_PREFIX}{job}"


def task_routes() -> dict[str, dict[str, str]]:
    routes = {task_name(stage): {"queue": stage.value} for stage in Stage}
    routes |= {job_task_name(job): {"queue": MAINTENANCE_QUEUE} for job in JOBS}
    return routes
