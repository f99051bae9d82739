"""evolve (seed 002 §4.5, the end of a session): one agent's evolution now, run as an operation
(`POST /api/agents/{agent_id}/evolve`, or an append that ends its conversation) instead of at
the periodic jobs' next run: consolidation until every statement stored so far has been
compared (a changed fact said a moment ago supersedes the older one now), then reflection when
its trigger is met and an LLM is configured. Both are the periodic jobs themselves, for this
agent, so a run of either meanwhile is serialised with it (the agent's lock) and finds nothing
left to do."""

from __future__ import annotations

from memora.jobs import consolidate, reflection
from memora.jobs.base import JobContext, JobResult


def run(ctx: JobContext) -> JobResult:
    """The counts of what changed: `examined`, `merged`, `superseded`, `reflections`."""
    if ctx.agent_key is None:
        raise ValueError("evolve runs for one agent")
    result = JobResult(details={"merged": 0, "superseded": 0, "reflections": 0})
    batch = ctx.settings.job_batch_size
    while True:  # each run compares a batch after the cursor the previous one left
        step = consolidate.run(ctx)
        _add(result, step)
        if step.examined < batch:
            break
    _add(result, reflection.run(ctx))
    return result


def _add(total: JobResult, step: JobResult) -> None:
    total.examined += step.examined
    total.changed += step.changed
    for name in ("merged", "superseded", "reflections"):
        total.details[name] += step.details.get(name, 0)


def counts(result: JobResult) -> dict[str, int]:
    """What the operation records (`operations.counts`)."""
    return {"examined": result.examined, "changed": result.changed, **result.details}
