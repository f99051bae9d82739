"""reflect trigger (Generative Agents): when the summed importance of an agent's memories
stored since its last reflection reaches MEMORA_REFLECTION_THRESHOLD (150 on the 1–10 scale),
the LLM reflects on them (memora.lifecycle.reflect). Without an LLM nothing happens."""

from __future__ import annotations

from typing import Any

from memora.basics.tenancy import DEFAULT_TENANT, SEPARATOR, Scope, client_agent_id
from memora.jobs.base import JobContext, JobResult
from memora.lifecycle.memory import Memories
from memora.lifecycle.reflect import reflect
from memora.lifecycle.scores import reflection_due
from memora.nlp.embedding import embedder_for
from memora.nlp.llm import LLMClient
from memora.store import evolution


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
    memories = Memories(s, ctx.pool, embedder_for(s), LLMClient(s))
    for key, ids in due:
        made = reflect(
            memories, _scope(key), client_agent_id(key), source_ids=ids, actor="job:reflect"
        )
        result.changed += 1 if made else 0
        result.details["reflections"] += len(made)
    return result
