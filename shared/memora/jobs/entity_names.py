"""entity_names (issue 32, item 5): re-clean the entities stored by older versions with today's
span cleaning and noise filter (memora.entities.names.reclean). Each run examines up to
MEMORA_JOB_BATCH_SIZE entities per agent in creation order, under the agent's resolution lock,
and goes on from there the next run; after the last it starts over, finding nothing to change
in entities it has cleaned (idempotent)."""

from __future__ import annotations

from memora.basics import metrics
from memora.entities.names import reclean
from memora.extraction.cleaning import SpeakerNames
from memora.jobs.base import JobContext, JobResult
from memora.store import entities, evolution
from memora.store import entity_names as store

JOB = "entity_names"


def run(ctx: JobContext) -> JobResult:
    limit = ctx.settings.job_batch_size
    result = JobResult(details={"renamed": 0, "merged": 0, "removed": 0, "tidied": 0})
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                entities.lock_agent(conn, key)
                batch = store.batch(conn, key, evolution.get_cursor(conn, JOB, key), limit)
                speakers = SpeakerNames.of(store.speakers(conn, key)) if batch else SpeakerNames()
                for stored in batch:
                    current = store.get(conn, stored.id)
                    if current is None:
                        continue
                    result.examined += 1
                    change = reclean(conn, key, current, speakers)
                    if change is not None:
                        result.changed += 1
                        result.details[change] += 1
                        metrics.ENTITY_NAME_CHANGES.labels(change).inc()
                end = batch[-1].position if len(batch) == limit else None
                evolution.set_cursor(conn, JOB, key, end)
    return result
