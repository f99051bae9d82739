"""conversation_consistency: the consistency check of the conversation index and the units'
sources, then its repair (seed 002 §7.7 periodic sync; autoRepair unless
MEMORA_CONVERSATION_AUTO_REPAIR is off, when it only reports). The use case is the one behind
`POST /api/agents/{agent_id}/repair` and `memora repair`."""

from __future__ import annotations

from typing import cast

from memora.db.pool import Pool
from memora.jobs.base import JobContext, JobResult
from memora.pipeline.context import AppContext
from memora.usecases.conversations import repair_agents


def run(ctx: JobContext) -> JobResult:
    app = AppContext(ctx.settings, cast(Pool, ctx.pool), ctx.backend)  # every job's pool is a Pool
    check_only = not ctx.settings.conversation_auto_repair
    with ctx.pool.connection() as conn:
        report = repair_agents(app, conn, ctx.agent_key, dry_run=check_only)
    found = report.counts
    return JobResult(
        examined=sum(found.values()),
        changed=sum(report.repaired.values()),
        details={**{f"found_{k}": v for k, v in found.items()}, **report.repaired},
    )
