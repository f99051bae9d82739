"""The inline task backend: runs a stage chain in the calling process (tests, one-off
scripts). Production sends stage work to Celery (services/workers/dispatch.py); both satisfy
`memora.pipeline.handoff.TaskBackend`. It sends no webhook deliveries: the sweep does
(memora.jobs.webhooks)."""

from __future__ import annotations

from uuid import UUID

from memora.basics.stages import Stage
from memora.pipeline.runner import REGISTRY, Pipeline


class InlineBackend:
    """Runs the whole stage chain synchronously in the calling process."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def enqueue(
        self,
        stage: Stage,
        operation_id: UUID,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        """At once: nothing can join an operation while this call runs it, nor wait on it. A
        stage run with the jobs (evolve) is left queued for a worker."""
        current: Stage | None = stage
        while current is not None and current in REGISTRY:
            current = self.pipeline.run(current, operation_id)
