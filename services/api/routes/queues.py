"""Queues and workers, for the operations console (admin keys only)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from memora.pipeline.monitoring import queue_depths, queue_oldest_ages
from services.api.deps import AdminDep
from services.api.errors import AUTH_ERRORS, APIError, error_responses
from services.api.schemas.admin import QueuesAndWorkers, Worker
from services.api.stack_health import active_queues

router = APIRouter(
    prefix="/api/admin", tags=["admin"], responses=error_responses(*AUTH_ERRORS, 403, 503)
)


@router.get("/queues", response_model=QueuesAndWorkers)
def queues_and_workers(_: AdminDep, request: Request) -> QueuesAndWorkers:
    broker = getattr(request.app.state, "broker", None)
    celery = getattr(request.app.state, "celery", None)
    if broker is None or celery is None:
        raise APIError(503, "no_broker", "this API runs its pipeline without a broker")
    try:
        depths, ages = queue_depths(broker), queue_oldest_ages(broker)
        answers = active_queues(celery)
    except Exception as exc:
        raise APIError(503, "broker_unavailable", f"broker unreachable: {exc}") from exc
    return QueuesAndWorkers(
        queues=depths,
        oldest_seconds={q: round(age, 3) for q, age in ages.items()},
        workers=[Worker(name=name, queues=found) for name, found in sorted(answers.items())],
    )
