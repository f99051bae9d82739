"""Celery task names and routing, named once: the API and the workers both import this."""

from __future__ import annotations

from collections.abc import Sequence

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES, WEBHOOKS_QUEUE, Stage, queue_for
from memora.jobs import JOBS

TASK_PREFIX = "memora."


def task_name(stage: Stage) -> str:
    return f"{TASK_PREFIX}{stage.value}"


def job_task_name(job: str) -> str:
    """A periodic job's task (`memora.reconcile`, …), on the maintenance queue."""
    return f"{TASK_PREFIX}{job}"


def task_operations(arg: str | list[str]) -> list[str]:
    """The operation ids a stage task carries: one, or a stage batch's (as a list)."""
    return [arg] if isinstance(arg, str) else list(arg)


DELIVER_WEBHOOK_TASK = f"{TASK_PREFIX}deliver_webhook"
WEBHOOK_THREADS = 8  # a webhook worker's deliveries in flight (at least)


def task_routes() -> dict[str, dict[str, str]]:
    routes = {task_name(stage): {"queue": queue_for(stage)} for stage in Stage}
    routes |= {job_task_name(name): {"queue": spec.queue} for name, spec in JOBS.items()}
    routes[DELIVER_WEBHOOK_TASK] = {"queue": WEBHOOKS_QUEUE}
    return routes


def pool_options(settings: Settings, queues: Sequence[str], concurrency: int) -> list[str]:
    """The worker's pool arguments: a thread per delivery for the webhooks queue alone; with
    batching on (MEMORA_STAGE_BATCH_SIZE > 1) and only
    ingest stage queues, a thread per operation of a batch (one process: its batcher runs the
    batch); else `concurrency` processes, one operation each."""
    stage_queues = {queue_for(s, backfill=b) for s in INGEST_STAGES for b in (False, True)}
    if queues and set(queues) == {WEBHOOKS_QUEUE}:  # waiting on receivers, not computing
        return ["-P", "threads", "-c", str(max(concurrency, WEBHOOK_THREADS))]
    if settings.stage_batch_size > 1 and queues and set(queues) <= stage_queues:
        return ["-P", "threads", "-c", str(settings.stage_batch_size)]
    return ["-c", str(concurrency)]
