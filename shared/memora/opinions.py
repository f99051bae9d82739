"""The opinion network (seed 000 §2.1.3): opinions formed by think, stored by the opinions stage.

`record()` makes an 'opinions' operation whose payload holds the drafts (the caller enqueues
Stage.OPINIONS after the commit). The stage (`prepare`, run by `Pipeline`) embeds the drafts and
finds their entities before taking the write lock, then writes each as an immutable unit with
fact_type 'opinion', event_date = formation time and confidence_score, resolves its entities and
links it like any other memory.

Versions (beyond the spec): an opinion that revisits an existing one — named by think's opinion
extraction, or else the agent's current opinion with embedding similarity ≥
`opinion_same_topic_similarity` — is stored as a new unit whose `supersedes` points at the
current head of that opinion's history, with confidence updated by `updated_confidence`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from psycopg import Connection
from pydantic import BaseModel, Field

from memora import entities, links
from memora.extraction.base import Fact, Mention
from memora.pipeline.errors import PermanentStageError
from memora.pipeline.stages import Stage
from memora.store import agents, operations
from memora.tenancy import Scope

if TYPE_CHECKING:
    from memora.pipeline.runner import Pipeline

Stance = Literal["new", "supports", "contradicts", "restates"]
Writer = Callable[[Connection[Any]], dict[str, int]]


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
            kind="opinions",
            first_stage=Stage.OPINIONS,
            payload=payload,
            counts={"opinions": len(drafts)},
        )
    return op_id


# ------------------------------------------------------------------------------ the stage
def prepare(pipeline: Pipeline, conn: Connection[Any], op: dict[str, Any]) -> Writer:
    """The opinions stage: compute outside the lock, write inside it (see Pipeline.run)."""
    from memora.pipeline.runner import unit_mentions

    payload = op["payload"] or {}
    try:
        drafts = [OpinionDraft.model_validate(d) for d in payload.get("opinions", [])]
        formed_at = datetime.fromisoformat(payload["formed_at"])
    except (ValueError, KeyError) as exc:
        raise PermanentStageError(f"invalid opinions payload: {exc}") from exc
    agent_id: str = op["agent_id"]
    vectors = pipeline.embedder.embed([d.text() for d in drafts])
    found = unit_mentions(
        [
            {"id": uuid.uuid4(), "text": d.text(), "event_date": formed_at, "mentions": None}
            for d in drafts
        ]
    )
    mentions: list[list[Mention]] = [list(u.mentions) for u in found]
    s = pipeline.settings
    weights = entities.ResolutionWeights(
        s.entity_name_weight,
        s.entity_cooccurrence_weight,
        s.entity_temporal_weight,
        s.entity_match_threshold,
    )
    link_cfg = links.LinkSettings(
        s.temporal_window_hours,
        s.temporal_links_per_unit,
        s.semantic_link_threshold,
        s.semantic_links_per_unit,
        s.entity_links_per_entity,
    )
    base_meta = {
        "query": payload.get("query"),
        "personality": payload.get("personality"),
        "based_on": payload.get("based_on", []),
        "operation_id": str(op["id"]),
    }

    def write(c: Connection[Any]) -> dict[str, int]:
        from memora.pipeline.runner import insert_facts

        c.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"opinions:{agent_id}",)
        )
        new_ids: list[UUID] = []
        revised = 0
        for draft, vector, found_mentions in zip(drafts, vectors, mentions, strict=True):
            previous = _previous(
                c, agent_id, draft.previous_id, vector, s.opinion_same_topic_similarity
            )
            stance: str = draft.stance
            if previous is not None and draft.previous_id is None:
                stance = "restates"
            confidence = updated_confidence(
                stance, draft.confidence, previous["confidence_score"] if previous else None
            )
            metadata = base_meta | {
                "statement": draft.statement,
                "reasons": draft.reasons,
                "stance": stance if previous else "new",
                "proposed_confidence": draft.confidence,
            }
            fact = Fact(
                item_index=0,
                seq=0,
                text=draft.text(),
                fact_type="opinion",
                event_date=formed_at,
                mentioned_at=formed_at,
                confidence=confidence,
                metadata=metadata,
                mentions=found_mentions,
            )
            [unit_id] = insert_facts(c, agent_id, None, [fact])
            c.execute(
                "UPDATE memory_units SET embedding = %s, supersedes = %s WHERE id = %s",
                (vector, previous["id"] if previous else None, unit_id),
            )
            new_ids.append(unit_id)
            revised += previous is not None
        units = [
            entities.UnitMentions(i, formed_at, m) for i, m in zip(new_ids, mentions, strict=True)
        ]
        resolved = entities.resolve(c, agent_id, units, weights)
        counts = {
            "opinions_stored": len(new_ids),
            "opinions_revised": revised,
            "entity_mentions": len(resolved.links),
        }
        counts |= {f"links_{k}": v for k, v in links.build_links(c, new_ids, link_cfg).items()}
        return counts

    return write


def _previous(
    conn: Connection[Any], agent_id: str, named: UUID | None, vector: Any, threshold: float
) -> dict[str, Any] | None:
    """The current head of the history this opinion continues, if any: the named opinion's
    (unless it is unknown), else the most similar current opinion above the threshold."""
    if named is not None:
        head = conn.execute(
            """
            WITH RECURSIVE chain AS (
                SELECT id, confidence_score, 0 AS depth FROM memory_units
                WHERE id = %s AND agent_id = %s AND fact_type = 'opinion'
                UNION ALL
                SELECT m.id, m.confidence_score, chain.depth + 1
                FROM memory_units m JOIN chain ON m.supersedes = chain.id
            )
            SELECT id, confidence_score FROM chain ORDER BY depth DESC LIMIT 1
            """,
            (named, agent_id),
        ).fetchone()
        if head is not None:
            return head
    row = conn.execute(
        """
        SELECT m.id, m.confidence_score, 1 - (m.embedding <=> %(v)s) AS similarity
        FROM memory_units m
        WHERE m.agent_id = %(a)s AND m.fact_type = 'opinion' AND m.embedding IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM memory_units n WHERE n.supersedes = m.id)
        ORDER BY m.embedding <=> %(v)s LIMIT 1
        """,
        {"v": vector, "a": agent_id},
    ).fetchone()
    return row if row is not None and row["similarity"] >= threshold else None


# ------------------------------------------------------------------------------ queries
_OPINION_COLUMNS = (
    "u.id, u.text, u.confidence_score AS confidence, u.event_date, u.supersedes, u.metadata"
)


def history(
    conn: Connection[Any], scope: Scope, agent_id: str, opinion_id: UUID
) -> list[dict[str, Any]]:
    """Every version of the opinion's history, oldest first; [] when it is not this agent's."""
    return conn.execute(
        f"""
        WITH RECURSIVE back AS (
            SELECT id, supersedes, 0 AS depth FROM memory_units
            WHERE id = %(id)s AND agent_id = %(a)s AND fact_type = 'opinion'
            UNION ALL
            SELECT m.id, m.supersedes, back.depth - 1
            FROM memory_units m JOIN back ON m.id = back.supersedes
        ), fwd AS (
            SELECT id, 0 AS depth FROM back WHERE depth = 0
            UNION ALL
            SELECT m.id, fwd.depth + 1 FROM memory_units m JOIN fwd ON m.supersedes = fwd.id
        ), chain AS (SELECT id, depth FROM back UNION SELECT id, depth FROM fwd)
        SELECT {_OPINION_COLUMNS}, chain.depth FROM chain JOIN memory_units u ON u.id = chain.id
        ORDER BY chain.depth
        """,
        {"id": opinion_id, "a": scope.key(agent_id)},
    ).fetchall()


def current(
    conn: Connection[Any], scope: Scope, agent_id: str, *, limit: int = 100, offset: int = 0
) -> list[dict[str, Any]]:
    """The agent's opinions that no later version supersedes, newest first."""
    return conn.execute(
        f"""
        SELECT {_OPINION_COLUMNS} FROM memory_units u
        WHERE u.agent_id = %s AND u.fact_type = 'opinion'
          AND NOT EXISTS (SELECT 1 FROM memory_units n WHERE n.supersedes = u.id)
        ORDER BY u.event_date DESC, u.id LIMIT %s OFFSET %s
        """,
        (scope.key(agent_id), limit, offset),
    ).fetchall()


def state(
    conn: Connection[Any], scope: Scope, agent_id: str, ids: list[UUID]
) -> dict[UUID, tuple[float | None, bool]]:
    """For the agent's opinion ids: (confidence, superseded?); other ids are left out."""
    if not ids:
        return {}
    rows = conn.execute(
        """
        SELECT u.id, u.confidence_score,
               EXISTS (SELECT 1 FROM memory_units n WHERE n.supersedes = u.id) AS superseded
        FROM memory_units u WHERE u.id = ANY(%s) AND u.agent_id = %s
        """,
        (ids, scope.key(agent_id)),
    ).fetchall()
    return {r["id"]: (r["confidence_score"], r["superseded"]) for r in rows}
