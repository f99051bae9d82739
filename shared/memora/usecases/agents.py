"""Agent profiles (seed 000 §4.2, §6.2): personality, background (merged by the LLM), the
opinion network as the agent holds it, and deleting an agent or all of a tenant's."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Conflict, Invalid, NotFound
from memora.basics.stages import Stage
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.pipeline.handoff import hand_off
from memora.store import agents, evolution, purge
from memora.store.units import HistoricOpinion
from memora.store.units import Opinion as Opinion
from memora.think import opinions
from memora.think.personality import full_personality, merge_background

log = logging.getLogger("memora.agents")
MERGE_ATTEMPTS = 3  # a merge is redone when a concurrent one changed the background meanwhile


@dataclass(frozen=True)
class AgentProfile:
    agent_id: str  # as the client names it
    personality: dict[str, float]  # every Big Five trait and bias_strength
    background: str
    limits: dict[str, Any]  # the limits the agent set (others: MEMORA_* defaults); null: none
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: dict[str, Any]) -> AgentProfile:
        return cls(
            row["agent_id"],
            full_personality(row["personality"]),
            row["background"] or "",
            row["limits"],
            row["created_at"],
            row["updated_at"],
        )


def list_profiles(
    app: AppContext, conn: Connection[Any], scope: Scope, *, limit: int, offset: int
) -> list[AgentProfile]:
    return [AgentProfile.of(r) for r in agents.list_agents(conn, scope, limit=limit, offset=offset)]


def profile(app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str) -> AgentProfile:
    """The agent's profile; created with the default personality (all 0.5) when new."""
    with conn.transaction():
        return AgentProfile.of(agents.get_or_create_agent(conn, scope, agent_id))


def update(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    *,
    personality: dict[str, float] | None = None,
    background: str | None = None,
    limits: dict[str, Any] | None = None,
) -> AgentProfile:
    """Create or update: personality values and limits merge over the current ones,
    background replaces."""
    with conn.transaction():
        row = agents.update_agent(
            conn, scope, agent_id, personality=personality, background=background, limits=limits
        )
    return AgentProfile.of(row)


def merge_into_background(app: AppContext, scope: Scope, agent_id: str, content: str) -> str:
    """The LLM merges `content` into the background (seed 000 §4.4); nothing is written unless
    the merge succeeds. Compare-and-set on the background it read, redone when a concurrent
    merge got there first; Conflict when it kept changing."""
    client = app.llm.get()
    for _ in range(MERGE_ATTEMPTS):
        with app.pool.tenant_connection(scope.tenant_id) as conn:
            row = agents.get_agent(conn, scope, agent_id)
        current = row["background"] if row else ""
        merged = merge_background(client, current, content)
        with app.pool.tenant_connection(scope.tenant_id) as conn:
            agents.ensure_agent(conn, scope, agent_id)
            if agents.replace_background(conn, scope, agent_id, current, merged):
                return merged
    raise Conflict("conflict", "the background kept changing during the merge; retry")


def current_opinions(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, *, limit: int, offset: int
) -> list[Opinion]:
    """The agent's current opinions (latest version of each), newest first."""
    return opinions.current(conn, scope, agent_id, limit=limit, offset=offset)


def opinion_history(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, opinion_id: UUID
) -> list[HistoricOpinion]:
    """All versions of the opinion, oldest first, whichever version `opinion_id` names."""
    rows = opinions.history(conn, scope, agent_id, opinion_id)
    if not rows:
        raise NotFound("not_found", f"opinion {opinion_id} not found for agent {agent_id}")
    return rows


def evolve(app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str) -> UUID:
    """An `evolve` operation: the agent's consolidation (and reflection, when due) now, on a
    worker, instead of at the periodic jobs' next run (seed 002 §4.5). Its id."""
    with conn.transaction():
        if agents.get_agent(conn, scope, agent_id) is None:
            raise NotFound("agent_not_found", f"agent {agent_id} has no memories")
        operation_id = evolution.create_evolve(conn, scope.key(agent_id), "request")
    hand_off(app.backend, Stage.EVOLVE, operation_id)
    return operation_id


@dataclass(frozen=True)
class Erasure:
    """An erasure's receipt: rows removed per table, and what a check of every table holding
    an agent's data still found of it afterwards, in the same transaction."""

    deleted: dict[str, int]
    left: purge.Remaining


def delete(app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str) -> Erasure:
    """Hard delete of the agent and everything of it, with its receipt."""
    with conn.transaction():
        deleted = agents.delete_agent(conn, scope, agent_id)
        return erasure_receipt(conn, deleted, [scope.key(agent_id)])


def delete_all(app: AppContext, conn: Connection[Any], scope: Scope, *, confirm: bool) -> Erasure:
    """Hard delete of every agent of the tenant and all their data ("delete all my data");
    the tenant and its API keys stay. Invalid unless confirmed."""
    if not confirm:
        raise Invalid("confirmation_required", "pass confirm=true to delete every agent")
    with conn.transaction():
        keys = agents.tenant_agent_keys(conn, scope)
        return erasure_receipt(conn, purge.purge_agents(conn, keys), keys)


def erasure_receipt(conn: Connection[Any], deleted: dict[str, int], keys: list[str]) -> Erasure:
    """The receipt of the erasure of `keys` that removed `deleted`, checked afterwards."""
    left = purge.remaining(conn, keys)
    if left.total:  # a table the purge does not know: a bug to hear about at once
        log.error("erasure left rows", extra={"remaining": left.rows})
    return Erasure(deleted, left)
