"""Periodic jobs (Celery beat on the maintenance queue; `memora jobs run NAME` runs one now).

Adding a job is one module with `run(ctx) -> JobResult` and one entry below; beat's schedule,
the Celery tasks and the metrics follow from this registry.
"""

from __future__ import annotations

from memora.basics.stages import WEBHOOKS_QUEUE
from memora.jobs import (
    attenuate,
    cleanup,
    consolidate,
    conversation_consistency,
    document_expiry,
    entity_names,
    entity_relations,
    graph_maintenance,
    heartbeat,
    limits,
    reconcile,
    reflection,
    term_counts,
    webhooks,
)
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
        # the evolution worker (seed 002 §4.5; docs/lifecycle.md)
        JobSpec(
            "consolidate",
            consolidate.run,
            lambda s: s.consolidate_interval_seconds,
            "merge duplicate statements, supersede changed attributes",
        ),
        JobSpec(
            "attenuate",
            attenuate.run,
            lambda s: s.attenuate_interval_seconds,
            "archive memories whose decayed importance fell below the floor",
        ),
        JobSpec(
            "reflect",
            reflection.run,
            lambda s: s.reflect_interval_seconds,
            "reflect when the importance of new memories passes the threshold",
        ),
        JobSpec(
            "graph_maintenance",
            graph_maintenance.run,
            lambda s: s.graph_maintenance_interval_seconds,
            "prune weak links, recount entity mentions",
        ),
        JobSpec(
            "entity_names",
            entity_names.run,
            lambda s: s.entity_names_interval_seconds,
            "re-clean stored entity names: merge, rename, remove noise entities",
        ),
        JobSpec(
            entity_relations.JOB,
            entity_relations.run,
            lambda s: s.entity_relations_interval_seconds,
            "read the relations of memories stored before the relation reader last changed",
        ),
        JobSpec(
            "term_counts",
            term_counts.run,
            lambda s: s.term_counts_interval_seconds,
            "fold the keyword statistics' new counts (keyword search's document frequencies)",
        ),
        JobSpec(
            "limits",
            limits.run,
            lambda s: s.limits_interval_seconds,
            "archive the lowest-retention memories (reflections) of agents over their limits",
        ),
        JobSpec(
            "cleanup",
            cleanup.run,
            lambda s: s.cleanup_interval_seconds,
            "purge forgotten memories past the retention, archived ones past the archive's",
        ),
        JobSpec(
            "document_expiry",
            document_expiry.run,
            lambda s: s.document_expiry_interval_seconds,
            "delete documents in the trash past its retention, temporary chats past theirs",
        ),
        JobSpec(
            "webhooks",
            webhooks.run,
            lambda s: s.webhook_sweep_interval_seconds,
            "send webhook deliveries that are due (retries, lost hand-offs)",
            queue=WEBHOOKS_QUEUE,
        ),
    )
}

__all__ = ["JOBS", "JobContext", "JobResult", "JobSpec", "run_job"]
