"""conversation_consistency: the consistency check of the conversation index and the units'
sources, then its repair (seed 002 §7.7 periodic sync; autoRepair unless
MEMORA_CONVERSATION_AUTO_REPAIR is off, when it only reports)."""

from __future__ import annotations

from memora.conversations import consistency
from memora.jobs.base import JobContext, JobResult


def run(ctx: JobContext) -> JobResult:
    roles = ctx.settings.indexed_roles
    with ctx.pool.connection() as conn:
        if ctx.settings.conversation_auto_repair:
            with conn.transaction():
                report = consistency.repair(conn, ctx.agent_key, roles)
        else:
            report = consistency.check(conn, ctx.agent_key, roles)
            conn.rollback()
    for operation_id, stage in report.operations:
        ctx.backend.enqueue(stage, operation_id)
    found = report.counts
    return JobResult(
        examined=sum(found.values()),
        changed=sum(report.repaired.values()),
        details={**{f"found_{k}": v for k, v in found.items()}, **report.repaired},
    )
