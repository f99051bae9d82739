"""The lifecycle's SQL: memory status (active, superseded, forgotten, archived; trashed with
its document, `store.trash`), importance and evidence on `memory_units`, the audit trail
`memory_events`, explicit links and job cursors. One memory's view (its detail, entities,
links and history) is read by `store.memory_view`.

Every status change writes its event in the same transaction. Only active units are searched
(see migration 0008): a status change takes a unit out of (or back into) every retriever at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from pgvector import Vector
from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.store.rows import fetch_all

STATUSES = ("active", "superseded", "forgotten", "archived", "trashed")
# What a memory's own lifecycle moves between; only its document's restore takes a unit out of
# `trashed` (store.trash).
MEMORY_STATUSES = STATUSES[:4]
# What remember and consolidation compare: facts (not opinions, not reflections).
STATEMENT_TYPES = ("world", "agent")

_UNIT_COLUMNS = (
    "u.id, u.text, u.context, u.fact_type, u.category, u.importance, u.status, u.status_at, "
    "u.status_reason, u.superseded_by, u.evidence_count, u.event_date, u.created_at, u.metadata, "
    "u.valid_from, u.valid_until, "
    "coalesce(a.access_count, 0) AS access_count, a.last_accessed_at"
)


@dataclass(frozen=True)
class MemoryUnit:
    """A unit in any status, with its lifecycle state and access counts (`get_units`)."""

    id: UUID
    text: str
    context: str | None
    fact_type: str
    category: str | None
    importance: float
    status: str
    status_at: datetime | None  # set by every status change
    status_reason: str | None
    superseded_by: UUID | None
    evidence_count: int
    event_date: datetime
    created_at: datetime
    metadata: dict[str, Any]
    valid_from: datetime
    valid_until: datetime | None
    access_count: int
    last_accessed_at: datetime | None


@dataclass(frozen=True)
class ActiveUnit:
    """An active unit as remember, consolidation and reflect compare it; `entities`: the names
    mentioned in it, lower-cased (`statements_after`)."""

    id: UUID
    text: str
    metadata: dict[str, Any]
    event_date: datetime
    created_at: datetime
    importance: float
    category: str | None
    embedding: Vector
    entities: list[str]


@dataclass(frozen=True)
class Neighbour(ActiveUnit):
    """An active unit with its cosine similarity to the vector asked about (`similar`,
    `mentioning`)."""

    similarity: float


@dataclass(frozen=True)
class Supersession:
    """A fact replaced by a newer one (`supersede`): both texts, who decided and why, and when
    the old fact stopped holding."""

    old_id: UUID
    new_id: UUID
    old_text: str
    new_text: str
    reason: str
    decided_by: str  # "rules" or "llm:<model>"
    until: datetime  # when the change happened (as the newer statement says), else learned
    effective_at: datetime | None = None  # the change's date, when the newer statement says it


@dataclass(frozen=True)
class RecentMemory:
    """An active memory as reflect lists it (`recent_memories`)."""

    id: UUID
    text: str
    event_date: datetime
    importance: float


def lock_agent(conn: Connection[Any], agent_key: str) -> None:
    """Serialise the lifecycle writes of one agent until the transaction ends."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"lifecycle:{agent_key}",)
    )


def record(
    conn: Connection[Any],
    agent_key: str,
    unit_ids: Sequence[UUID],
    event: str,
    actor: str,
    *,
    reason: str | None = None,
    related_id: UUID | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """One audit event per unit."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO memory_events (agent_id, unit_id, event, related_id, reason, actor, "
            "details) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [
                (agent_key, i, event, related_id, reason, actor, Jsonb(details or {}))
                for i in unit_ids
            ],
        )


# ---------------------------------------------------------------------------------- reading
def similar(
    conn: Connection[Any],
    agent_key: str,
    vector: np.ndarray,
    limit: int,
    *,
    min_similarity: float = 0.0,
    fact_types: Sequence[str] = STATEMENT_TYPES,
    exclude: UUID | None = None,
) -> list[Neighbour]:
    """The agent's active units nearest to `vector`, most similar first."""
    conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
    rows = fetch_all(
        conn,
        Neighbour,
        """
        SELECT n.*, coalesce((SELECT array_agg(lower(ue.mention)) FROM unit_entities ue
                              WHERE ue.unit_id = n.id), '{}') AS entities
        FROM (
            SELECT u.id, u.text, u.metadata, u.event_date, u.created_at, u.importance,
                   u.category, u.embedding, near.similarity
            FROM (
                SELECT v.unit_id, 1 - (v.embedding <=> %(v)s::halfvec) AS similarity
                FROM memory_vectors v
                WHERE v.agent_id = %(a)s AND v.fact_type = ANY(%(t)s)
                  AND v.unit_id IS DISTINCT FROM %(x)s
                ORDER BY v.embedding <=> %(v)s::halfvec LIMIT %(k)s
            ) near JOIN memory_units u ON u.id = near.unit_id
        ) n WHERE n.similarity >= %(min)s
        """,
        {
            "v": vector,
            "a": agent_key,
            "t": list(fact_types),
            "k": limit,
            "min": min_similarity,
            "x": exclude,
        },
    )
    return sorted(rows, key=lambda r: -r.similarity)


def mentioning(
    conn: Connection[Any], agent_key: str, name: str, vector: np.ndarray, limit: int
) -> list[Neighbour]:
    """The agent's active statements whose words include `name` (through the keyword table's
    index), newest first, with their similarity to `vector`: where remember looks for an
    earlier value of the attribute a statement sets, however differently it was phrased."""
    return fetch_all(
        conn,
        Neighbour,
        """
        SELECT u.id, u.text, u.metadata, u.event_date, u.created_at, u.importance, u.category,
               u.embedding, 1 - (u.embedding <=> %(v)s) AS similarity,
               coalesce((SELECT array_agg(lower(ue.mention)) FROM unit_entities ue
                         WHERE ue.unit_id = u.id), '{}') AS entities
        FROM memory_search s JOIN memory_units u ON u.id = s.unit_id
        WHERE s.agent_id = %(a)s AND s.search_vector @@ plainto_tsquery('english', %(n)s)
          AND s.fact_type = ANY(%(t)s)
        ORDER BY s.event_date DESC LIMIT %(k)s
        """,
        {"v": vector, "a": agent_key, "n": name, "t": list(STATEMENT_TYPES), "k": limit},
    )


def get_units(conn: Connection[Any], agent_key: str, ids: Sequence[UUID]) -> list[MemoryUnit]:
    """The agent's units among `ids` with their lifecycle state and access counts."""
    return fetch_all(
        conn,
        MemoryUnit,
        f"""
        SELECT {_UNIT_COLUMNS} FROM memory_units u LEFT JOIN memory_access a ON a.unit_id = u.id
        WHERE u.id = ANY(%s) AND u.agent_id = %s
        """,
        (list(ids), agent_key),
    )


# ---------------------------------------------------------------------------------- writing
def insert_unit(
    conn: Connection[Any],
    agent_key: str,
    unit_id: UUID,
    *,
    text: str,
    vector: np.ndarray,
    fact_type: str,
    importance: float,
    category: str | None,
    metadata: dict[str, Any],
    at: datetime,
    valid_from: datetime | None = None,
) -> None:
    """A new unit said at `at`; its fact holds from `valid_from` (None: from `at`)."""
    conn.execute(
        """
        INSERT INTO memory_units (id, agent_id, text, embedding, fact_type, event_date,
                                  mentioned_at, importance, category, metadata, status_at,
                                  valid_from)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """,
        (unit_id, agent_key, text, vector, fact_type, at, at, importance, category,
         Jsonb(metadata), at, valid_from or at),
    )  # fmt: skip


def merge_into(
    conn: Connection[Any],
    unit_id: UUID,
    *,
    text: str,
    vector: np.ndarray | None,
    metadata: dict[str, Any],
    importance: float,
    category: str | None,
    evidence: int,
) -> None:
    """Fold a restatement into a unit: the kept text (and its vector when it changed), merged
    metadata, the higher importance, evidence added."""
    conn.execute(
        """
        UPDATE memory_units SET text = %(t)s, embedding = coalesce(%(v)s, embedding),
            metadata = %(m)s, importance = GREATEST(importance, %(i)s),
            category = coalesce(category, %(c)s), evidence_count = evidence_count + %(e)s
        WHERE id = %(id)s
        """,
        {
            "t": text,
            "v": vector,
            "m": Jsonb(metadata),
            "i": importance,
            "c": category,
            "e": evidence,
            "id": unit_id,
        },
    )


def set_status(
    conn: Connection[Any],
    agent_key: str,
    ids: Sequence[UUID],
    status: str,
    *,
    reason: str | None,
    at: datetime,
    from_statuses: Sequence[str] = MEMORY_STATUSES,
    superseded_by: UUID | None = None,
) -> list[UUID]:
    """Move the agent's units among `ids` that are in `from_statuses` to `status`; the ids
    changed. Back to active, a unit's validity window is open again (`valid_until` cleared);
    `supersede` is the one place that closes it."""
    rows = conn.execute(
        """
        UPDATE memory_units SET status = %(s)s, status_at = %(at)s, status_reason = %(r)s,
            superseded_by = %(by)s,
            valid_until = CASE WHEN %(s)s::text = 'active' THEN NULL ELSE valid_until END
        WHERE id = ANY(%(ids)s) AND agent_id = %(a)s AND status = ANY(%(from)s)
          AND status <> %(s)s
        RETURNING id
        """,
        {
            "s": status,
            "at": at,
            "r": reason,
            "by": superseded_by,
            "ids": list(ids),
            "a": agent_key,
            "from": list(from_statuses),
        },
    ).fetchall()
    return [r["id"] for r in rows]


def supersede(
    conn: Connection[Any], agent_key: str, change: Supersession, actor: str, *, at: datetime
) -> bool:
    """The old unit, if still active, superseded by the new one: its window closes at
    `change.until` (not before it opened), and its audit event records both texts, the decider,
    the reason and the window. Every supersede (remember, consolidation) goes through here.
    False when the old unit was no longer active."""
    row = conn.execute(
        """
        UPDATE memory_units SET status = 'superseded', status_at = %(at)s, status_reason = %(r)s,
            superseded_by = %(new)s, valid_until = GREATEST(valid_from, %(until)s)
        WHERE id = %(old)s AND agent_id = %(a)s AND status = 'active'
        RETURNING valid_from, valid_until
        """,
        {"at": at, "r": change.reason, "new": change.new_id, "until": change.until,
         "old": change.old_id, "a": agent_key},
    ).fetchone()  # fmt: skip
    if row is None:
        return False
    record(
        conn, agent_key, [change.old_id], "superseded", actor, reason=change.reason,
        related_id=change.new_id,
        details={"decided_by": change.decided_by, "old_text": change.old_text,
                 "new_text": change.new_text, "valid_from": row["valid_from"].isoformat(),
                 "valid_until": row["valid_until"].isoformat(),
                 "effective_at": change.effective_at.isoformat() if change.effective_at else None},
    )  # fmt: skip
    return True


def add_link(
    conn: Connection[Any], a: UUID, b: UUID, link_type: str, weight: float, relationship: str
) -> None:
    """A link stored both ways (the graph walks `from_unit`); an existing one is updated."""
    conn.execute(
        """
        INSERT INTO memory_links (from_unit, to_unit, link_type, weight, relationship)
        VALUES (%(a)s, %(b)s, %(t)s, %(w)s, %(r)s), (%(b)s, %(a)s, %(t)s, %(w)s, %(r)s)
        ON CONFLICT (from_unit, to_unit, link_type)
        DO UPDATE SET weight = EXCLUDED.weight, relationship = EXCLUDED.relationship
        """,
        {"a": a, "b": b, "t": link_type, "w": weight, "r": relationship},
    )


def recent_memories(conn: Connection[Any], agent_key: str, limit: int) -> list[RecentMemory]:
    """The agent's active memories, most important and newest first (reflection's sources when
    no topic is given)."""
    return fetch_all(
        conn,
        RecentMemory,
        "SELECT id, text, event_date, importance FROM memory_units WHERE agent_id = %s "
        "AND status = 'active' AND fact_type <> 'reflection' "
        "ORDER BY created_at DESC, importance DESC LIMIT %s",
        (agent_key, limit),
    )
