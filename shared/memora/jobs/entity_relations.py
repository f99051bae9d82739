"""entity_relations: read the relations between entities of the memories stored before the
relation reader last changed (memora.lifecycle.entity_relations.READER_VERSION), so that what
it reads now reaches an agent's older memories too (the entity stage reads new ones as they
arrive). Each run reads up to MEMORA_JOB_BATCH_SIZE memories per agent, in the order they were
said, and goes on from there the next run; after an agent's last memory its cursor stays at
the end until the reader's version changes. Recording is idempotent: a relation read again
from the same memory changes nothing (memora.store.relations.record)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from memora.jobs.base import JobContext, JobResult
from memora.lifecycle import relating
from memora.lifecycle.entity_relations import READER_VERSION
from memora.store import entities, evolution, units

JOB = "entity_relations"
CURSOR = f"{JOB}.v{READER_VERSION}"  # the cursor of a new version starts at the beginning
DONE = evolution.Position(datetime.max.replace(tzinfo=UTC), UUID(int=0))


def run(ctx: JobContext) -> JobResult:
    result = JobResult(details={"relations_added": 0, "relations_evidence": 0})
    if not ctx.settings.entity_relations:
        return result
    limit = ctx.settings.job_batch_size
    with ctx.pool.connection() as conn:
        for key in evolution.agents_not_at(conn, CURSOR, DONE, ctx.agent_key):
            at = evolution.get_cursor(conn, CURSOR, key)
            batch = units.said_after(conn, key, (at.created_at, at.id) if at else None, limit)
            conn.commit()  # the parse below holds no transaction open
            stated = relating.read_units(batch)
            with conn.transaction():
                entities.lock_agent(conn, key)  # the entity stage records under this lock
                counts = relating.record_units(conn, key, batch, stated)
                last = batch[-1] if len(batch) == limit else None
                end = evolution.Position(last.event_date, last.id) if last else DONE
                evolution.set_cursor(conn, CURSOR, key, end)
            result.examined += len(batch)
            for name in result.details:
                result.details[name] += counts.get(name, 0)
    result.changed = sum(result.details.values())
    return result
