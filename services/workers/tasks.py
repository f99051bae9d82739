"""Thin Celery tasks: take an operation id, run one stage of the core pipeline, enqueue the next.

Nothing is built at import (beat and flower load this module too): each worker process makes
its state (`worker()`: settings, pool, the Celery backend, the pipeline) on first use after the
fork, and the worker's signals load its models and install its metrics at start.

With MEMORA_STAGE_BATCH_SIZE > 1 a stage worker runs a thread per task and the tasks' operations
go through one `StageBatcher` per stage: run together (memora.pipeline.batch), and handed on
together (one next-stage task carries the batch's operations). Each task is acknowledged after
its batch; an operation that failed in a task of several is retried alone, with its own
back-off and failure record, and the others go on.

Transient failures are retried with bounded exponential back-off (and jitter); each failed
attempt and the final failure are written to the operation, where the API shows them.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from celery import Task
from celery.exceptions import Retry
from celery.signals import worker_init, worker_process_init
from celery.utils.time import get_exponential_backoff_interval

from memora.basics import logs
from memora.basics.config import get_settings
from memora.basics.errors import PermanentStageError
from memora.basics.stages import Stage
from memora.db.pool import make_pool
from memora.infra.tracing import check_tracing_settings, configure_tracing
from memora.jobs import JOBS, JobContext, JobSpec, evolve, run_job
from memora.pipeline.batch import Outcome, StageBatcher
from memora.pipeline.context import AppContext, Job, StageContext, Writer, models_to_preload
from memora.pipeline.runner import REGISTRY, Pipeline, Prepare
from memora.webhooks import delivery
from services.workers import metrics as worker_metrics
from services.workers.celery_app import app
from services.workers.dispatch import CeleryBackend
from services.workers.queues import (
    DELIVER_WEBHOOK_TASK,
    job_task_name,
    task_name,
    task_operations,
)

log = logging.getLogger("memora.worker")


@dataclass
class _Worker:
    """One worker process's state, made on first use after the fork: the application context
    (settings, pool, the Celery backend), the pipeline over it and the stages' batchers."""

    context: AppContext
    pipeline: Pipeline
    celery: CeleryBackend  # the context's backend, with its batch send
    batchers: dict[Stage, StageBatcher] = field(default_factory=dict)


_workers: dict[int, _Worker] = {}
_workers_lock = threading.Lock()


def worker() -> _Worker:
    """This process's state (one per process: a pool must not cross a fork)."""
    pid = os.getpid()
    with _workers_lock:
        if pid not in _workers:
            settings = get_settings()
            pool = make_pool(
                settings.require_database_url(),
                min_size=1,
                max_size=4,
                name="worker",
                row_security=settings.row_security,
            )
            celery = CeleryBackend(app)
            context = AppContext(settings, pool, celery)
            _workers[pid] = _Worker(context, Pipeline(settings, pool, backend=celery), celery)
        return _workers[pid]


def pipeline() -> Pipeline:
    """One pipeline (pool and models) per worker process, created after the fork."""
    return worker().pipeline


def batcher(stage: Stage) -> StageBatcher | None:
    """The process's batcher of `stage` when batching is on (MEMORA_STAGE_BATCH_SIZE > 1: the
    worker runs a thread per task, services.workers.queues.pool_options), else None."""
    state = worker()
    size = state.pipeline.settings.stage_batch_size
    if size <= 1:
        return None
    with _workers_lock:
        if stage not in state.batchers:
            wait = state.pipeline.settings.stage_batch_wait_ms / 1000
            send = state.celery.enqueue_many
            state.batchers[stage] = StageBatcher(
                state.pipeline, stage, max_size=size, max_wait=wait, send=send
            )
        return state.batchers[stage]


@worker_init.connect
def _install_metrics(**_: Any) -> None:
    """The pool metrics and the LLM's usage hook, in the worker (not in beat or flower)."""
    worker_metrics.install(pool=lambda: pipeline().pool)


_preloaded: dict[str, str] = {"names": ""}  # what the main process loaded; children inherit it


@worker_init.connect
def _preload_or_exit(sender: Any = None, **_: Any) -> None:
    """Loads the models of this worker's stages (MEMORA_PRELOAD) in the main process, before
    the pool forks (the children inherit them) and before the consumer starts: the worker
    answers pings and reports ready (its heartbeat file) only once they are loaded. A model
    that cannot load stops the worker at start with one clear line. (Celery only logs an
    exception from a signal handler and carries on; SystemExit gets through.)"""
    queues = sender.app.amqp.queues.consume_from if sender is not None else None
    settings = get_settings()
    names = models_to_preload(settings.preload, queues or (), llm=settings.llm_configured)
    _preloaded["names"] = names
    if not names:
        return
    logs.configure(get_settings().log_format, get_settings().log_level)  # Celery's comes later
    log.info("loading models before taking work: %s", names)
    try:
        StageContext(get_settings()).preload(names)  # the models only (no pool yet)
    except Exception as exc:
        log.critical("worker cannot start: %s", exc)
        raise SystemExit(f"memora worker cannot start: {exc}") from exc


@worker_init.connect
def _tracing_in_threads(sender: Any = None, **_: Any) -> None:
    """A thread pool (batching on) runs tasks in this process and sends no
    worker_process_init: tracing starts here. A prefork pool's children start their own; a
    setting they could not follow stops the worker here, at start."""
    try:
        check_tracing_settings()
    except ValueError as exc:
        log.critical("worker cannot start: %s", exc)
        raise SystemExit(f"memora worker cannot start: {exc}") from exc
    pool = getattr(sender, "pool_cls", None)
    name = pool if isinstance(pool, str) else getattr(pool, "__module__", "")
    if "thread" in str(name):
        configure_tracing("memora-worker")


@worker_process_init.connect
def _preload(**_: Any) -> None:
    configure_tracing("memora-worker")  # after the fork: the provider's threads are this one's
    if _preloaded["names"]:
        pipeline().context.preload(_preloaded["names"])


class StageTask(Task):
    stage: Stage
    autoretry_for = (Exception,)
    dont_autoretry_for = (PermanentStageError,)
    retry_backoff = 2
    retry_jitter = True
    acks_late = True

    # Read from the settings when Celery asks (the task is made at the worker's start, a retry
    # reads max_retries), not when this module is imported.
    @property
    def retry_backoff_max(self) -> int:
        return get_settings().task_retry_backoff_max

    @property
    def max_retries(self) -> int:
        return get_settings().task_max_retries

    def on_retry(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # The retry is already enqueued; recording its error is best effort. Raising here (the
        # database is down, the usual cause of the retry) would make Celery fail the task for
        # good and mark the operation failed although its retry is pending.
        for operation_id in task_operations(args[0]):
            _record_retry(self.stage, UUID(operation_id), exc)

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        if isinstance(exc, Retry):
            return
        for operation_id in task_operations(args[0]):
            _record_final(self.stage, UUID(operation_id), exc)

    def retry_alone(self, operation_id: UUID, exc: BaseException, backfill: bool) -> None:
        """One operation of this task's batch failed: retried in a task of its own, with this
        task's back-off, or failed for good (permanent, or out of retries); the others of the
        task are done and go on."""
        retries = self.request.retries
        if isinstance(exc, PermanentStageError) or retries >= self.max_retries:
            _record_final(self.stage, operation_id, exc)
            return
        delay = get_exponential_backoff_interval(
            self.retry_backoff, retries, self.retry_backoff_max, self.retry_jitter
        )
        kwargs = {"backfill": backfill}
        self.retry(args=[str(operation_id)], kwargs=kwargs, exc=exc, countdown=delay, throw=False)
        worker_metrics.count_retry(self, self.request, exc)
        _record_retry(self.stage, operation_id, exc)


def _record_final(stage: Stage, operation_id: UUID, exc: BaseException) -> None:
    log.error("stage %s failed for operation %s: %s", stage.value, operation_id, exc)
    pipeline().record_failure(stage, operation_id, _describe(exc), final=True)


def _record_retry(stage: Stage, operation_id: UUID, exc: BaseException) -> None:
    """Best effort: the retry is already sent (see `StageTask.on_retry`)."""
    try:
        pipeline().record_failure(stage, operation_id, _describe(exc), final=False)
    except Exception as record_exc:
        log.warning(
            "stage %s of operation %s will be retried; its error could not be recorded: %s",
            stage.value,
            operation_id,
            record_exc,
        )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _evolve(ctx: StageContext, conn: Any, job: Job) -> Writer:
    """The evolve stage: the agent's evolution jobs, with this worker's pool and backend."""
    app_context = worker().context
    jobs = JobContext(
        app_context.settings, app_context.pool, app_context.backend, agent_key=job.agent_key
    )
    counts = evolve.counts(evolve.run(jobs))
    return lambda _conn: counts


# Stages whose work is the jobs' (above the pipeline in the core's layers), run by the pipeline
# with the prepare step given here; one operation at a time.
JOB_STAGES: dict[Stage, Prepare] = {Stage.EVOLVE: _evolve}


def _run(task: StageTask, operation_ids: list[str], backfill: bool, held: bool) -> str | None:
    stage, first = task.stage, UUID(operation_ids[0])
    if held and not pipeline().claim_held(first):
        return None  # released first: the extract sent then runs it
    if stage not in JOB_STAGES and (shared := batcher(stage)) is not None:
        # This thread waits for the batch holding its operations; the batch enqueues their
        # next stages after its commit (before this task is acknowledged).
        ids = [UUID(op) for op in operation_ids]
        return _settle(task, shared.submit(ids, backfill=backfill), backfill)
    following = None
    for operation_id in operation_ids:  # one, unless batching was just turned off
        following = pipeline().run(stage, UUID(operation_id), JOB_STAGES.get(stage))
        if following is not None:
            worker().context.backend.enqueue(following, UUID(operation_id), backfill=backfill)
    return following.value if following else None


def _settle(task: StageTask, outcomes: dict[UUID, Outcome], backfill: bool) -> str | None:
    """The task's end after its batch: the next stage sent unless the batch sent it; its own
    error raised (retried or recorded by Celery) for a task of one operation, each failed
    operation retried alone for a task of several."""
    failed = {op: o.error for op, o in outcomes.items() if o.error is not None}
    if len(outcomes) == 1 and failed:
        raise next(iter(failed.values()))
    for operation_id, error in failed.items():
        task.retry_alone(operation_id, error, backfill)
    for operation_id, outcome in outcomes.items():
        if outcome.following is not None and not outcome.sent and outcome.error is None:
            worker().context.backend.enqueue(outcome.following, operation_id, backfill=backfill)
    going_on = [o.following for o in outcomes.values() if o.following and o.error is None]
    return going_on[0].value if going_on else None


def _stage_task(stage: Stage) -> Task:
    @app.task(name=task_name(stage), base=StageTask, bind=True, stage=stage)
    def run_stage(
        self: StageTask, operations: str | list[str], backfill: bool = False, held: bool = False
    ) -> str | None:
        return _run(self, task_operations(operations), backfill, held)

    return run_stage


# One Celery task per registered stage, each named and routed to its queue by services.workers
# .queues; a worker started with `-A services.workers.tasks -Q <queue>` runs that stage.
STAGE_TASKS: dict[Stage, Task] = {stage: _stage_task(stage) for stage in (*REGISTRY, *JOB_STAGES)}


def _job_task(spec: JobSpec) -> Task:
    @app.task(name=job_task_name(spec.name), ignore_result=True)
    def run_periodic_job() -> int:
        context = worker().context
        ctx = JobContext(context.settings, context.pool, context.backend)
        return run_job(spec, ctx).changed

    return run_periodic_job


JOB_TASKS: dict[str, Task] = {name: _job_task(spec) for name, spec in JOBS.items()}


@app.task(name=DELIVER_WEBHOOK_TASK, ignore_result=True, acks_late=True)
def deliver_webhook(delivery_id: str) -> str | None:
    """One attempt of a webhook delivery (its retries are scheduled in the database and sent
    by the `webhooks` job); on the `webhooks` queue, so a slow receiver holds up nothing else."""
    context = worker().context
    return delivery.deliver(context.pool, UUID(delivery_id), context.settings)
