"""Celery task names and routing, named once: the API and the workers both import this."""

from __future__ import annotations

from memora.pipeline.stages import MAINTENANCE_QUEUE, Stage

TASK_PREFIX = "memora."
RECONCILE_TASK = "memora.reconcile"
HEARTBEAT_TASK = "memora.beat_heartbeat"


def task_name(stage: Stage) -> str:
    return f"{TASK_PREFIX}{stage.value}"


def task_routes() -> dict[str, dict[str, str]]:
    routes = {task_name(stage): {"queue": stage.value} for stage in Stage}
    routes[RECONCILE_TASK] = {"queue": MAINTENANCE_QUEUE}
    routes[HEARTBEAT_TASK] = {"queue": MAINTENANCE_QUEUE}
    return routes
