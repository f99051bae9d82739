"""cleanup: forgotten memories past MEMORA_FORGET_RETENTION_DAYS, and archived ones past the
agent's archive retention (MEMORA_ARCHIVE_RETENTION_DAYS unless the agent set its own; none:
kept), are purged for real (units, links, entity references, access counts, embeddings;
entities nothing mentions any more). The audit trail keeps a `purged` event for each."""

from __future__ import annotations

from datetime import timedelta

from memora.basics import metrics
from memora.basics.models import utcnow
from memora.jobs.base import JobContext, JobResult
from memora.lifecycle.limits import resolve
from memora.store import entities, evolution
from memora.store import lifecycle as store


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    result = JobResult()
    now = utcnow()
    forgotten_before = now - timedelta(days=s.forget_retention_days)
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                store.lock_agent(conn, key)
                forgotten = evolution.expired(
                    conn, key, "forgotten", forgotten_before, s.job_batch_size
                )
                retention = resolve(s, evolution.agent_limits(conn, key)).archive_retention_days
                archived = (
                    []
                    if retention is None
                    else evolution.expired(
                        conn, key, "archived", now - timedelta(days=retention), s.job_batch_size
                    )
                )
                result.examined += len(forgotten) + len(archived)
                if not forgotten and not archived:
                    continue
                store.record(conn, key, forgotten, "purged", "job:cleanup",
                             reason="forgotten past the retention period")  # fmt: skip
                if archived:
                    store.record(conn, key, archived, "purged", "job:cleanup",
                                 reason=f"archived more than {retention:g} days ago")  # fmt: skip
                counts = evolution.purge(conn, forgotten + archived)
                orphans = entities.delete_orphans(conn, key)
            metrics.LIMIT_ACTIONS.labels("purged_archived").inc(len(archived))
            result.changed += counts["memory_units"]
            for name, n in (("purged_archived", len(archived)),
                            ("links_deleted", counts["memory_links"]),
                            ("entities_deleted", orphans)):  # fmt: skip
                result.details[name] = result.details.get(name, 0) + n
    return result
