"""Per-agent limits (seed 002 §4.9): the most active memories, reflections and entities (the
graph's nodes) an agent keeps, and how long archived memories stay restorable before `cleanup`
purges them. Each agent's `limits` (set through PUT /api/agents/{id}) override the MEMORA_*
defaults key by key; a key set to null there means "no limit" for that agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memora.basics.config import Settings

LIMIT_KEYS = ("max_memories", "max_reflections", "max_graph_nodes", "archive_retention_days")


@dataclass(frozen=True)
class AgentLimits:
    max_memories: int | None  # active memories (every kind but reflections and opinions)
    max_reflections: int | None  # active reflections
    max_graph_nodes: int | None  # entities
    archive_retention_days: float | None  # archived longer than this: purged (None: kept)


def resolve(settings: Settings, stored: dict[str, Any]) -> AgentLimits:
    """The agent's limits: its own where it set them (null included), else the defaults."""
    values = {k: stored[k] if k in stored else getattr(settings, k) for k in LIMIT_KEYS}
    return AgentLimits(**values)
