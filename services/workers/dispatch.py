"""The Celery task backend: sends stage work (and webhook deliveries) to its queue by task
name."""

from __future__ import annotations

from uuid import UUID

from celery import Celery

from memora.basics.stages import WEBHOOKS_QUEUE, Stage, queue_for
from services.workers.queues import DELIVER_WEBHOOK_TASK, task_name


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

    def deliver_webhooks(self, delivery_ids: list[UUID]) -> None:
        """The webhook deliveries of a committed transaction, one task each
        (memora.webhooks.events' dispatcher)."""
        for delivery_id in delivery_ids:
            self.app.send_task(DELIVER_WEBHOOK_TASK, args=[str(delivery_id)], queue=WEBHOOKS_QUEUE)
