"""Where stage work goes: a Celery queue in production, or inline (tests, one-off scripts)."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from memora.pipeline.runner import Pipeline
from memora.queues import Stage


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
