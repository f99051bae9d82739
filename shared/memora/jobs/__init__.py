"""Periodic jobs (Celery beat on the maintenance queue; `memora jobs run NAME` runs one now).

Adding a job is one module with `run(ctx) -> JobResult` and one entry below; beat's schedule,
the Celery tasks and the metrics follow from this registry.
"""

from __future__ import annotations

from memora.jobs import conversation_consistency, heartbeat, reconcile
from memora.jobs.base import JobContext, JobResult, JobSpec, run_job

JOBS: dict[str, JobSpec] = {
    spec.name: spec
    for spec in (
        JobSpec(
            "reconcile",
            reconcile.run,
            lambda s: s.reconcile_interval_seconds,
            "re-enqueue operations that stopped moving",
        ),
        JobSpec(
            "beat_heartbeat",
            heartbeat.run,
            lambda s: s.beat_heartbeat_seconds,
            "stamp beat's heartbeat in the broker (alert MemoraBeatHeartbeatStale)",
        ),
        JobSpec(
            "conversation_consistency",
            conversation_consistency.run,
            lambda s: s.conversation_consistency_interval_seconds,
            "check the conversation index and units' sources against the messages; repair",
        ),
    )
}

__all__ = ["JOBS", "JobContext", "JobResult", "JobSpec", "run_job"]
