"""graph maintenance (seed 002 §4.5): generated links weaker than MEMORA_GRAPH_PRUNE_WEIGHT are
pruned (explicit and reflection links never), and entities' mention counts, which entity
resolution's co-occurrence score reads, are recounted over active memories only."""

from __future__ import annotations

from memora.jobs.base import JobContext, JobResult
from memora.store import evolution


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    result = JobResult(details={"links_pruned": 0, "entities_recounted": 0})
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                pruned = evolution.prune_links(conn, key, s.graph_prune_weight, s.job_batch_size)
                recounted = evolution.refresh_mention_counts(conn, key, s.job_batch_size)
            result.examined += 1
            result.changed += pruned + recounted
            result.details["links_pruned"] += pruned
            result.details["entities_recounted"] += recounted
    return result
