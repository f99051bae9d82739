"""limits (seed 002 §4.9): an agent over its max_memories (max_reflections) gets its active
memories (reflections) of lowest retention score archived, at most job_batch_size a run: out
of default search, restorable (POST …/memories/{id}/restore) until the archive retention
passes and `cleanup` purges them. Each archive is an `archived` event with the score and the
limit. An agent over its max_graph_nodes loses its least mentioned entities (the graph's
nodes) with their mentions and entity links; the memories stay, and a later mention of the
name makes the entity again. An agent within its limits is left alone: runs are idempotent."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import Connection

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.jobs.base import JobContext, JobResult
from memora.lifecycle.limits import resolve
from memora.lifecycle.scores import retention_score
from memora.store import evolution
from memora.store import lifecycle as store

ACTOR = "job:limits"
KINDS = (("archived_memory", "max_memories"), ("archived_reflection", "max_reflections"))


def run(ctx: JobContext) -> JobResult:
    result = JobResult()
    now = utcnow()
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                store.lock_agent(conn, key)
                examined, archived = _enforce(conn, ctx.settings, key, now)
            result.examined += examined
            for action, n in archived.items():  # counted once committed
                metrics.LIMIT_ACTIONS.labels(action).inc(n)
                result.details[action] = result.details.get(action, 0) + n
                result.changed += n
    return result


def _enforce(
    conn: Connection[Any], s: Settings, key: str, now: datetime
) -> tuple[int, dict[str, int]]:
    """Archive what the agent holds beyond its limits: (active rows counted, archived by action)."""
    limits = resolve(s, evolution.agent_limits(conn, key))
    examined, archived = 0, {}
    for action, name in KINDS:
        limit = getattr(limits, name)
        if limit is None:
            continue
        reflections = name == "max_reflections"
        active = evolution.count_active(conn, key, reflections=reflections)
        examined += active
        excess = min(active - limit, s.job_batch_size)
        if excess <= 0:
            continue
        rows = evolution.lowest_retention(
            conn, key, reflections=reflections, now=now, rate=s.attenuation_rate, limit=excess
        )
        reason = f"over {name} ({limit})"
        done = set(store.set_status(conn, key, [r.id for r in rows], "archived", reason=reason,
                                    at=now, from_statuses=("active",)))  # fmt: skip
        for r in rows:
            if r.id in done:
                days = (now - r.last_used).total_seconds() / 86400.0
                score = retention_score(r.importance, days, s.attenuation_rate)
                store.record(conn, key, [r.id], "archived", ACTOR, reason=reason,
                             details={"limit": limit, "active": active,
                                      "retention_score": round(score, 6)})  # fmt: skip
        archived[action] = len(done)
    if limits.max_graph_nodes is not None:
        examined += _prune_entities(conn, s, key, limits.max_graph_nodes, archived)
    return examined, archived


def _prune_entities(
    conn: Connection[Any], s: Settings, key: str, limit: int, removed: dict[str, int]
) -> int:
    """Remove the entities past `limit`, at most a batch; counts them in `removed`."""
    held = evolution.count_entities(conn, key)
    excess = min(held - limit, s.job_batch_size)
    if excess > 0:
        removed["pruned_entity"] = len(evolution.remove_weakest_entities(conn, key, excess))
    return held
