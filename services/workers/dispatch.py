"""The Celery task backend: sends stage work to its queue by task name."""

from __future__ import annotations

from uuid import UUID

from celery import Celery

from memora.basics.stages import Stage, queue_for
from services.workers.queues import task_name


class CeleryBackend:
    def __init__(self, app: Celery) -> None:
        self.app = app

    def enqueue(self, stage: Stage, operation_id: UUID, *, backfill: bool = False) -> None:
        self.app.send_task(
            task_name(stage),
            args=[str(operation_id)],
            kwargs={"backfill": backfill},
            queue=queue_for(stage, backfill=backfill),
        )
