"""The state of an agent's conversation index, and its rebuild (seed 002 §7.3).

The index records the embedding model and dimension its live generation was built with; a
service configured with another model sees `model_changed` and a `reindex` operation rebuilds
the index into the next generation in the background (searches keep reading the live one)
and switches to it in one update.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.stages import OperationKind, first_stage
from memora.store import chunks, operations


def status(conn: Connection[Any], agent_key: str, settings: Settings) -> dict[str, Any]:
    state = chunks.find_state(conn, agent_key) or {
        "generation": 1,
        "embedding_model": settings.embedding_model,
        "embedding_dim": settings.embedding_dim,
        "building": None,
        "building_model": None,
        "last_sync_at": None,
    }
    counts = chunks.counts(conn, agent_key, state["generation"])
    return {
        "enabled": settings.conversation_index,
        "generation": state["generation"],
        "embedding_model": state["embedding_model"],
        "embedding_dim": state["embedding_dim"],
        "configured_model": settings.embedding_model,
        "configured_dim": settings.embedding_dim,
        "model_changed": (state["embedding_model"], state["embedding_dim"])
        != (settings.embedding_model, settings.embedding_dim),
        "rebuilding": state["building"] is not None,
        "building_generation": state["building"],
        "last_sync_at": state["last_sync_at"],
        **counts,
    }


def request_reindex(conn: Connection[Any], agent_key: str) -> UUID:
    """A `reindex` operation (the caller commits, then hands off its first stage)."""
    return operations.create_operation_for_key(
        conn,
        agent_key,
        kind=OperationKind.REINDEX,
        first_stage=first_stage(OperationKind.REINDEX),
        payload={"priority": "live"},
    )
