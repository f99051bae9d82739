"""The Celery application: Redis broker, late acks, one queue per stage."""

from __future__ import annotations

from celery import Celery

from memora.config import Settings, get_settings
from services.workers.queues import HEARTBEAT_TASK, RECONCILE_TASK, task_routes


def create_celery(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    app = Celery(
        "memora",
        broker=settings.broker_url or "redis://127.0.0.1:6379/0",
        # imported when a worker or beat starts (they import `app` from here)
        include=["services.workers.heartbeat"],
    )
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
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
        beat_schedule={
            "reconcile-stuck-operations": {
                "task": RECONCILE_TASK,
                "schedule": settings.reconcile_interval_seconds,
            },
            # services/workers/heartbeat.py; one that waited a whole interval is dropped
            "beat-heartbeat": {
                "task": HEARTBEAT_TASK,
                "schedule": settings.beat_heartbeat_seconds,
                "options": {"expires": settings.beat_heartbeat_seconds},
            },
        },
    )
    return app


app = create_celery()
