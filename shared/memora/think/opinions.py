"""The opinion network (seed 000 §2.1.3): opinions formed by think, stored by the opinions stage.

`record()` makes an 'opinions' operation whose payload holds the drafts (the caller enqueues
Stage.OPINIONS after the commit). The stage (`memora.pipeline.stages.opinions`) embeds the
drafts and finds their entities before taking the write lock, then writes each as an immutable
unit with fact_type 'opinion', event_date = formation time and confidence_score, resolves its
entities and links it like any other memory.

Versions (beyond the spec): an opinion that revisits an existing one — named by think's opinion
extraction, or else the agent's current opinion with embedding similarity ≥
`opinion_same_topic_similarity` — is stored as a new unit whose `supersedes` points at the
current head of that opinion's history, with confidence updated by `updated_confidence`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection
from pydantic import BaseModel, Field

from memora.basics.stages import OperationKind, Stage
from memora.basics.tenancy import Scope
from memora.store import agents, operations, units

Stance = Literal["new", "supports", "contradicts", "restates"]


class OpinionDraft(BaseModel):
    statement: str = Field(min_length=1)
    reasons: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)
    previous_id: UUID | None = None  # the existing opinion this one revisits, if known
    stance: Stance = "new"

    def text(self) -> str:
        """Seed 000 §2.1.3's form: "statement (Reasons: a; b)"; confidence is its own column."""
        return (
            f"{self.statement} (Reasons: {'; '.join(self.reasons)})"
            if self.reasons
            else self.statement
        )


def updated_confidence(stance: str, proposed: float, previous: float | None) -> float:
    """Supporting evidence never lowers confidence, contradicting evidence never raises it."""
    if previous is None:
        return proposed
    if stance == "supports":
        return max(proposed, previous)
    if stance == "contradicts":
        return min(proposed, previous)
    return proposed


def record(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    drafts: list[OpinionDraft],
    *,
    formed_at: datetime,
    query: str,
    personality: dict[str, float],
    based_on: list[UUID],
) -> UUID:
    """Create the operation that will store `drafts` (committed here)."""
    payload = {
        "opinions": [d.model_dump(mode="json") for d in drafts],
        "formed_at": formed_at.isoformat(),
        "query": query,
        "personality": personality,
        "based_on": [str(i) for i in based_on],
    }
    with conn.transaction():
        agents.ensure_agent(conn, scope, agent_id)
        op_id = operations.create_operation(
            conn,
            scope,
            agent_id,
            kind=OperationKind.OPINIONS,
            first_stage=Stage.OPINIONS,
            payload=payload,
            counts={"opinions": len(drafts)},
        )
    return op_id


# ------------------------------------------------------------------------------ queries
def history(
    conn: Connection[Any], scope: Scope, agent_id: str, opinion_id: UUID
) -> list[units.HistoricOpinion]:
    """Every version of the opinion's history, oldest first; [] when it is not this agent's."""
    return units.opinion_history(conn, scope.key(agent_id), opinion_id)


def current(
    conn: Connection[Any], scope: Scope, agent_id: str, *, limit: int = 100, offset: int = 0
) -> list[units.Opinion]:
    """The agent's opinions that no later version supersedes, newest first."""
    return units.current_opinions(conn, scope.key(agent_id), limit=limit, offset=offset)


def state(
    conn: Connection[Any], scope: Scope, agent_id: str, ids: list[UUID]
) -> dict[UUID, units.OpinionState]:
    """The state of the agent's opinions among `ids`; other ids are left out."""
    return units.opinion_state(conn, scope.key(agent_id), ids)
