"""conversation_consistency: the consistency check of the conversation index and the units'
sources, then its repair (seed 002 §7.7 periodic sync; autoRepair unless
MEMORA_CONVERSATION_AUTO_REPAIR is off, when it only reports). The use case is the one behind
`POST /api/agents/{agent_id}/repair` and `memora repair`."""

from __future__ import annotations

from memora.jobs.base import JobContext, JobResult
from memora.usecases.conversations import repair_agents


def run(ctx: JobContext) -> JobResult:
    backend = ctx.backend if ctx.settings.conversation_auto_repair else None  # None: check only
    with ctx.pool.connection() as conn:
        report = repair_agents(conn, backend, ctx.settings, ctx.agent_key)
    found = report.counts
    return JobResult(
        examined=sum(found.values()),
        changed=sum(report.repaired.values()),
        details={**{f"found_{k}": v for k, v in found.items()}, **report.repaired},
    )
