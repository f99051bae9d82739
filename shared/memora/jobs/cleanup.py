"""cleanup: forgotten memories past MEMORA_FORGET_RETENTION_DAYS are purged for real (units,
links, entity references, access counts, embeddings; entities nothing mentions any more). The
audit trail keeps a `purged` event for each."""

from __future__ import annotations

from datetime import timedelta

from memora.basics.models import utcnow
from memora.jobs.base import JobContext, JobResult
from memora.store import entities, evolution
from memora.store import lifecycle as store


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    result = JobResult()
    before = utcnow() - timedelta(days=s.forget_retention_days)
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                store.lock_agent(conn, key)
                ids = evolution.expired_forgotten(conn, key, before, s.job_batch_size)
                result.examined += len(ids)
                if not ids:
                    continue
                store.record(conn, key, ids, "purged", "job:cleanup",
                             reason="forgotten past the retention period")  # fmt: skip
                counts = evolution.purge(conn, ids)
                orphans = entities.delete_orphans(conn, key)
            result.changed += counts["memory_units"]
            result.details["links_deleted"] = (
                result.details.get("links_deleted", 0) + counts["memory_links"]
            )
            result.details["entities_deleted"] = result.details.get("entities_deleted", 0) + orphans
    return result
