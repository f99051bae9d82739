"""reflect (seed 002 §4.4.4; Generative Agents' reflection): related memories in, higher-level
insights out, each stored as a `reflection` memory linked to the memories it rests on.

Sources: with a topic, the active memories most similar to it; without one, the newest and
most important (or the ids the reflection job passes: what was stored since the last
reflection). "shallow" reads `reflection_sources` memories and writes at most 2 insights,
"deep" twice as many memories and at most 5 insights (memora.lifecycle.reflect). Needs an LLM
(LLMNotConfigured else), asked before the agent's lifecycle lock is taken.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from uuid import UUID

from memora.basics.errors import NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.lifecycle.memory import index, mentions_of
from memora.lifecycle.recall import REFLECTION
from memora.lifecycle.reflect import Depth, Insight, Reflection, Source, insights
from memora.lifecycle.scores import clamp_importance
from memora.nlp.llm import LLMNotConfigured
from memora.pipeline.context import AppContext, pinning
from memora.store import agents
from memora.store import lifecycle as store

REFLECTED_TYPES = ("world", "agent", "opinion")


@pinning
def reflect(
    app: AppContext,
    scope: Scope,
    agent_id: str,
    *,
    topic: str | None = None,
    depth: Depth = "shallow",
    source_ids: list[UUID] | None = None,
    actor: str = "api",
) -> list[Reflection]:
    """The insights the LLM drew from the agent's memories, stored as reflections."""
    if not app.settings.llm_configured:
        raise LLMNotConfigured("reflect needs an LLM: set MEMORA_LLM_BASE_URL")
    llm = app.llm.get()
    sources = _sources(app, scope, agent_id, topic, depth, source_ids)
    if not sources:
        return []
    found = insights(llm, sources, topic, depth)
    if not found:
        return []
    return _store(app, scope.key(agent_id), found, topic, depth, actor)


def _sources(
    app: AppContext,
    scope: Scope,
    agent_id: str,
    topic: str | None,
    depth: Depth,
    source_ids: list[UUID] | None,
) -> Sequence[Source]:
    """The ids' active memories, else those most similar to the topic, else the newest and
    most important; NotFound for an agent that does not exist."""
    key = scope.key(agent_id)
    count = app.settings.reflection_sources * (2 if depth == "deep" else 1)
    with app.pool.connection() as conn:
        if agents.get_agent(conn, scope, agent_id) is None:
            raise NotFound("agent_not_found", f"agent {agent_id!r} not found")
        if source_ids is not None:  # of any status: the active ones are read
            units = store.get_units(conn, key, source_ids[:count])
            return [u for u in units if u.status == "active"]
        if topic:
            vector = app.embedder.embed([topic])[0]
            return store.similar(conn, key, vector, count, fact_types=REFLECTED_TYPES)
        return store.recent_memories(conn, key, count)


def _store(
    app: AppContext,
    key: str,
    found: list[tuple[Insight, list[UUID]]],
    topic: str | None,
    depth: Depth,
    actor: str,
) -> list[Reflection]:
    """Each insight as a `reflection` memory linked to its sources, under the agent's lock."""
    vectors = app.embedder.embed([i.text.strip() for i, _ in found])
    now = utcnow()
    made: list[Reflection] = []
    with app.pool.connection() as conn, conn.transaction():
        store.lock_agent(conn, key)
        for (insight, ids), vector in zip(found, vectors, strict=True):
            unit_id = uuid.uuid4()
            text = insight.text.strip()
            importance = clamp_importance(insight.importance)
            meta = {"source": "reflection", "topic": topic, "depth": depth,
                    "sources": [str(i) for i in ids]}  # fmt: skip
            store.insert_unit(
                conn, key, unit_id, text=text, vector=vector, fact_type=REFLECTION,
                importance=importance, category=REFLECTION, metadata=meta, at=now,
            )  # fmt: skip
            index(conn, app.settings, key, unit_id, mentions_of(text), now, text)
            for source in ids:
                store.add_link(conn, unit_id, source, "reflection", 1.0, "derived_from")
            store.record(conn, key, [unit_id], "reflected", actor, details={"sources": len(ids)})
            made.append(Reflection(unit_id, text, importance, ids))
    return made
