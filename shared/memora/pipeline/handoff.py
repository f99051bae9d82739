"""Handing committed work to the pipeline: the `TaskBackend` protocol (a Celery queue in
production, inline in tests and one-off scripts: `memora.pipeline.backend.InlineBackend`) and
`hand_off`, the one way a use case gives it an operation after its commit. The same backend
(the application context's, memora.pipeline.context.AppContext) takes the committed webhook
deliveries when it can send them (memora.webhooks.events.dispatch_committed). Light on
purpose: use cases import this, not the stage driver."""

from __future__ import annotations

import logging
from typing import Protocol
from uuid import UUID

from memora.basics.stages import Stage

log = logging.getLogger("memora.handoff")


class TaskBackend(Protocol):
    def enqueue(
        self,
        stage: Stage,
        operation_id: UUID,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        """Run `stage` of the operation, not before `delay` seconds from now (a backend that
        runs it at once may ignore the delay: it only gives appends time to join). `held`: the
        operation waits on another's release (memora.store.append_operations); this task
        runs it only if it was not released first."""


def hand_off(
    backend: TaskBackend,
    stage: Stage,
    operation_id: UUID,
    *,
    backfill: bool = False,
    delay: float = 0.0,
    held: bool = False,
) -> bool:
    """Enqueue `stage` of an operation whose rows are committed (after `delay` seconds). The
    operation is durable, so when the broker cannot take the message now the reconciler
    re-enqueues it later (MEMORA_STUCK_AFTER_SECONDS): logged here, never raised. Returns
    whether it was sent. `held`: see `TaskBackend.enqueue`."""
    try:
        backend.enqueue(stage, operation_id, backfill=backfill, delay=delay, held=held)
    except Exception:
        log.warning(
            "broker unavailable; operation left to the reconciler",
            extra={"operation": str(operation_id), "stage": stage.value},
            exc_info=True,
        )
        return False
    return True
