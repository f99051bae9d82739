"""One entity of an agent with its relations (`GET /api/agents/{agent_id}/entities/{name}`):
who or what it is, how often memories name it, and the relations read between it and other
entities (memora.lifecycle.entity_relations), current first, each with the memories that are
its evidence and its validity."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from memora.basics.errors import NotFound
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.store import graph, portability
from memora.store import relations as store


def view(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, name: str
) -> dict[str, Any]:
    """The entity named `name` (its id, canonical name, a name or an alias; the most mentioned
    where several match) with its relations. 404 `agent_not_found`, `entity_not_found`."""
    key = scope.key(agent_id)
    if not portability.agent_exists(conn, key):
        raise NotFound("agent_not_found", f"no agent {agent_id!r}")
    found = graph.find_entity(conn, key, name)
    row = store.entity(conn, found["id"]) if found is not None else None
    if row is None:
        raise NotFound("entity_not_found", f"no entity {name!r} for agent {agent_id!r}")
    me = {"id": row["id"], "name": row["canonical_name"], "entity_type": row["entity_type"]}
    return {
        **row,
        "agent_id": agent_id,
        "relations": [_relation(r, me) for r in store.of_entity(conn, row["id"])],
    }


def _relation(r: dict[str, Any], me: dict[str, Any]) -> dict[str, Any]:
    other = {"id": r["other_id"], "name": r["other_name"], "entity_type": r["other_type"]}
    status = "current"
    if r["valid_until"] is not None:
        status = "superseded" if r["superseded_by"] is not None else "ended"
    return {
        "id": r["id"],
        "relation": r["relation"],
        "direction": "outgoing" if r["outgoing"] else "incoming",
        "subject": me if r["outgoing"] else other,
        "object": other if r["outgoing"] else me,
        "other": other,
        "evidence": r["evidence"],
        "valid_from": r["valid_from"],
        "valid_until": r["valid_until"],
        "superseded_by": r["superseded_by"],
        "ended_by": r["ended_by"],
        "status": status,
        "source": r["source"],
    }
