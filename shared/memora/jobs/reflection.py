"""reflect trigger (Generative Agents): when the summed importance of an agent's memories
stored since its last reflection reaches MEMORA_REFLECTION_THRESHOLD (150 on the 1–10 scale),
the LLM reflects on them (memora.usecases.reflect). Without an LLM nothing happens."""

from __future__ import annotations

from typing import Any, cast

from memora.basics.tenancy import DEFAULT_TENANT, SEPARATOR, Scope, client_agent_id
from memora.db.pool import Pool
from memora.jobs.base import JobContext, JobResult
from memora.lifecycle.scores import reflection_due
from memora.pipeline.context import AppContext
from memora.store import evolution
from memora.usecases.reflect import reflect


def _scope(key: str) -> Scope:
    tenant, _, _ = key.rpartition(SEPARATOR)
    return Scope(tenant or DEFAULT_TENANT)


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    result = JobResult(details={"reflections": 0})
    if not s.llm_configured:
        result.details["llm_not_configured"] = 1
        return result
    due: list[tuple[str, list[Any]]] = []
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            total, ids = evolution.importance_since_reflection(conn, key)
            result.examined += 1
            if reflection_due(total, s.reflection_threshold):
                due.append((key, ids))
    if not due:
        return result
    app = AppContext(s, cast(Pool, ctx.pool), ctx.backend)  # every job's pool is a Pool
    for key, ids in due:
        made = reflect(app, _scope(key), client_agent_id(key), source_ids=ids, actor="job:reflect")
        result.changed += 1 if made else 0
        result.details["reflections"] += len(made)
    return result
