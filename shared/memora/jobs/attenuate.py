"""attenuate (seed 002 §4.5): importance · e^(−λ·days since the last access) fades; a memory
below MEMORA_ATTENUATION_FLOOR that has not been used for MEMORA_ARCHIVE_AGE_DAYS is archived:
out of default search, restorable (POST …/memories/{id}/restore). The stored importance is not
rewritten (the decay is computed from it each run), so runs are idempotent."""

from __future__ import annotations

from datetime import timedelta

from memora.basics.models import utcnow
from memora.jobs.base import JobContext, JobResult
from memora.lifecycle.scores import attenuated
from memora.store import evolution
from memora.store import lifecycle as store


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    result = JobResult()
    now = utcnow()
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                store.lock_agent(conn, key)
                rows = evolution.fading(
                    conn, key, now - timedelta(days=s.archive_age_days), s.job_batch_size
                )
                result.examined += len(rows)
                faded = [
                    r.id
                    for r in rows
                    if attenuated(
                        r.importance,
                        (now - r.last_used).total_seconds() / 86400.0,
                        s.attenuation_rate,
                    )
                    < s.attenuation_floor
                ]
                done = store.set_status(
                    conn, key, faded, "archived", reason="attenuated below the floor", at=now,
                    from_statuses=("active",),
                )  # fmt: skip
                store.record(conn, key, done, "archived", "job:attenuate",
                             reason="attenuated below the floor")  # fmt: skip
            result.changed += len(done)
    return result
