"""The Celery application: Redis broker, late acks, one queue per stage."""

from __future__ import annotations

from celery import Celery
from celery.signals import setup_logging

from memora.basics import logs
from memora.basics.config import Settings, get_settings, report_environment
from memora.jobs import JOBS
from services.workers.queues import job_task_name, task_routes


def create_celery(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    app = Celery("memora", broker=settings.broker)
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,  # a task is acknowledged only after it finished...
        task_reject_on_worker_lost=True,  # ...and redelivered if its process died
        worker_prefetch_multiplier=1,
        task_routes=task_routes(),
        task_default_queue="extract",
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout,
            "queue_order_strategy": "priority",
        },
        worker_send_task_events=settings.task_events,  # Flower turns them on while it runs
        task_send_sent_event=settings.task_events,
        worker_hijack_root_logger=False,
        # Every registered periodic job whose interval is positive (memora.jobs.JOBS).
        # A run that waited a whole interval in the queue is dropped: the next one comes anyway.
        beat_schedule={
            name: {
                "task": job_task_name(name),
                "schedule": interval,
                "options": {"expires": interval},
            }
            for name, spec in JOBS.items()
            if (interval := spec.interval_seconds(settings)) > 0
        },
    )
    return app


@setup_logging.connect
def _logging(loglevel: str | None = None, **_: object) -> None:
    """Workers and beat log through Memora's formatter (MEMORA_LOG_FORMAT), not Celery's."""
    settings = get_settings()
    logs.configure(settings.log_format, loglevel or settings.log_level)
    report_environment()


app = create_celery()
