"""The Celery task backends: stage work (and webhook deliveries) sent to their queues by task
name. Both satisfy `memora.pipeline.handoff.TaskBackend`; `CeleryBackend` also sends webhook
deliveries (`memora.webhooks.events.WebhookSender`)."""

from __future__ import annotations

import time
from uuid import UUID

from celery import Celery

from memora.basics.stages import WEBHOOKS_QUEUE, Stage, queue_for
from memora.pipeline.monitoring import SENT_AT_HEADER
from services.workers.queues import DELIVER_WEBHOOK_TASK, task_name


class CeleryStages:
    """Stage work only: a process using it leaves webhook deliveries to whoever sends them
    (`memora jobs run webhooks` sends them itself)."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def enqueue(
        self,
        stage: Stage,
        operation_id: UUID,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        self.app.send_task(
            task_name(stage),
            args=[str(operation_id)],
            kwargs={"backfill": backfill} | ({"held": True} if held else {}),
            queue=queue_for(stage, backfill=backfill),
            countdown=delay or None,
            headers={SENT_AT_HEADER: time.time()},  # the queue's oldest message's age
        )

    def enqueue_many(self, stage: Stage, operation_ids: list[UUID], backfill: bool) -> None:
        """One task of `stage` for several operations (a stage batch's, handed on together:
        memora.pipeline.batch.send_following); one operation's is sent as `enqueue` sends it."""
        ids = [str(op) for op in operation_ids]
        self.app.send_task(
            task_name(stage),
            args=[ids[0] if len(ids) == 1 else ids],
            kwargs={"backfill": backfill},
            queue=queue_for(stage, backfill=backfill),
            headers={SENT_AT_HEADER: time.time()},
        )


class CeleryBackend(CeleryStages):
    """Stage work and webhook deliveries (the API's, the query service's and the workers')."""

    def deliver_webhooks(self, delivery_ids: list[UUID]) -> None:
        """The webhook deliveries of a committed transaction, one task each on the `webhooks`
        queue (memora.webhooks.events.dispatch_committed)."""
        for delivery_id in delivery_ids:
            self.app.send_task(
                DELIVER_WEBHOOK_TASK,
                args=[str(delivery_id)],
                queue=WEBHOOKS_QUEUE,
                headers={SENT_AT_HEADER: time.time()},
            )
