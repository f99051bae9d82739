"""Where stage work goes: a Celery queue in production, or inline (tests, one-off scripts);
and `hand_off`, the one way committed work is given to it."""

from __future__ import annotations

import logging
from typing import Protocol
from uuid import UUID

from memora.basics.stages import Stage
from memora.pipeline.runner import Pipeline

log = logging.getLogger("memora.handoff")


class TaskBackend(Protocol):
    def enqueue(self, stage: Stage, operation_id: UUID, *, backfill: bool = False) -> None: ...


class InlineBackend:
    """Runs the whole stage chain synchronously in the calling process."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def enqueue(self, stage: Stage, operation_id: UUID, *, backfill: bool = False) -> None:
        current: Stage | None = stage
        while current is not None:
            current = self.pipeline.run(current, operation_id)


def hand_off(
    backend: TaskBackend, stage: Stage, operation_id: UUID, *, backfill: bool = False
) -> bool:
    """Enqueue `stage` of an operation whose rows are committed. The operation is durable, so
    when the broker cannot take the message now the reconciler re-enqueues it later
    (MEMORA_STUCK_AFTER_SECONDS): logged here, never raised. Returns whether it was sent."""
    try:
        backend.enqueue(stage, operation_id, backfill=backfill)
    except Exception:
        log.warning(
            "broker unavailable; operation left to the reconciler",
            extra={"operation": str(operation_id), "stage": stage.value},
            exc_info=True,
        )
        return False
    return True
