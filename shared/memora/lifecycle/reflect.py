"""reflect (seed 002 §4.4.4; Generative Agents' reflection): related memories in, higher-level
insights out, each stored as a `reflection` memory linked to the memories it rests on.

Sources: with a topic, the active memories most similar to it; without one, the newest and
most important (or the ids the reflection job passes: what was stored since the last
reflection). "shallow" reads `reflection_sources` memories and writes at most 2 insights,
"deep" twice as many memories and at most 5 insights. Needs an LLM (LLMNotConfigured else).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, Field

from memora.basics.errors import NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.lifecycle.memory import Memories, mentions_of
from memora.lifecycle.recall import REFLECTION
from memora.lifecycle.scores import clamp_importance
from memora.nlp.llm import LLMNotConfigured
from memora.store import agents
from memora.store import lifecycle as store

REFLECT_MARKER = "You reflect on an AI agent's memories"
Depth = Literal["shallow", "deep"]


class _Insight(BaseModel):
    text: str = Field(min_length=3, max_length=2000)
    sources: list[int] = Field(min_length=1, description="numbers of the memories it rests on")
    importance: float = Field(default=6, ge=1, le=10)


class _Reflection(BaseModel):
    insights: list[_Insight] = Field(max_length=10)


@dataclass(frozen=True)
class Reflection:
    id: UUID
    text: str
    importance: float
    sources: list[UUID]


def reflect(
    memories: Memories,
    scope: Scope,
    agent_id: str,
    *,
    topic: str | None = None,
    depth: Depth = "shallow",
    source_ids: list[UUID] | None = None,
    actor: str = "api",
) -> list[Reflection]:
    llm = memories.llm
    if llm is None:
        raise LLMNotConfigured("reflect needs an LLM: set MEMORA_LLM_BASE_URL")
    s = memories.settings
    key = scope.key(agent_id)
    count = s.reflection_sources * (2 if depth == "deep" else 1)
    sources: Sequence[store.MemoryUnit | store.Neighbour | store.RecentMemory]
    with memories.pool.connection() as conn:
        if agents.get_agent(conn, scope, agent_id) is None:
            raise NotFound("agent_not_found", f"agent {agent_id!r} not found")
        if source_ids is not None:  # of any status: the active ones are read
            units = store.get_units(conn, key, source_ids[:count])
            sources = [u for u in units if u.status == "active"]
        elif topic:
            vector = memories.embedder.embed([topic])[0]
            sources = store.similar(
                conn, key, vector, count, fact_types=("world", "agent", "opinion")
            )
        else:
            sources = store.recent_memories(conn, key, count)
    if not sources:
        return []
    listing = "\n".join(
        f"{i}. [{r.event_date:%Y-%m-%d}] {r.text}" for i, r in enumerate(sources, 1)
    )
    most = 5 if depth == "deep" else 2
    focus = f" about {topic}" if topic else ""
    answer = llm.complete_json(
        "background",
        [
            {
                "role": "system",
                "content": f"{REFLECT_MARKER}. From the numbered memories, write at most {most} "
                "high-level insights (patterns, preferences, lasting conclusions) that no single "
                "memory states, each with the numbers of the memories it rests on and an "
                "importance from 1 (trivial) to 10 (core to who the person is).",
            },
            {"role": "user", "content": f"Memories{focus}:\n{listing}"},
        ],
        _Reflection,
    )
    made: list[Reflection] = []
    insights = [
        (i, [sources[n - 1].id for n in dict.fromkeys(i.sources) if 1 <= n <= len(sources)])
        for i in answer.insights[:most]
    ]
    insights = [(i, ids) for i, ids in insights if ids]
    if not insights:
        return []
    vectors = memories.embedder.embed([i.text.strip() for i, _ in insights])
    now = utcnow()
    with memories.pool.connection() as conn, conn.transaction():
        store.lock_agent(conn, key)
        for (insight, ids), vector in zip(insights, vectors, strict=True):
            unit_id = uuid.uuid4()
            text = insight.text.strip()
            importance = clamp_importance(insight.importance)
            meta = {"source": "reflection", "topic": topic, "depth": depth,
                    "sources": [str(i) for i in ids]}  # fmt: skip
            store.insert_unit(
                conn, key, unit_id, text=text, vector=vector, fact_type=REFLECTION,
                importance=importance, category=REFLECTION, metadata=meta, at=now,
            )  # fmt: skip
            memories.index(conn, key, unit_id, mentions_of(text), now)
            for source in ids:
                store.add_link(conn, unit_id, source, "reflection", 1.0, "derived_from")
            store.record(conn, key, [unit_id], "reflected", actor, details={"sources": len(ids)})
            made.append(Reflection(unit_id, text, importance, ids))
    return made
