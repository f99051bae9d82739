"""One memory's view, read only: the unit in full in any status, the entities it names, its
links (explicit first, then the strongest), its audit history and the units it replaced
(`GET /api/agents/{agent_id}/memories/{id}`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.store.graph import LABEL_CHARS  # a linked memory's label, as a graph node's
from memora.store.rows import fetch_all, fetch_one

MAX_LINKS = 50  # a memory's view lists at most this many links


@dataclass(frozen=True)
class MemoryEvent:
    """One audit event of a unit (`history`)."""

    event: str
    at: datetime
    reason: str | None
    actor: str
    related_id: UUID | None
    details: dict[str, Any]


@dataclass(frozen=True)
class MemoryDetail:
    """A unit in full, in any status (`memory_detail`): its text and dates, its lifecycle
    state, its source document and access counts; no embedding."""

    id: UUID
    text: str
    context: str | None
    fact_type: str
    category: str | None
    importance: float
    event_date: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime
    created_at: datetime
    confidence_score: float | None
    metadata: dict[str, Any]
    status: str
    status_at: datetime | None
    status_reason: str | None
    superseded_by: UUID | None
    supersedes: UUID | None  # an opinion's: the version it revised
    valid_from: datetime  # when its fact began to hold
    valid_until: datetime | None  # when a later fact replaced it (None: still true)
    evidence_count: int
    embedded: bool
    document_id: str | None
    item_index: int
    access_count: int
    last_accessed_at: datetime | None


@dataclass(frozen=True)
class MentionedEntity:
    """An entity a unit names, with the words that named it (`entities_of`)."""

    id: UUID
    name: str
    entity_type: str
    mention: str


@dataclass(frozen=True)
class LinkedMemory:
    """One of a unit's outgoing links with the other end's label and status (`links_of`)."""

    target: UUID
    type: str
    weight: float
    relationship: str | None  # explicit links'
    label: str  # the start of the other end's text (LABEL_CHARS)
    status: str  # the other end's


def memory_detail(conn: Connection[Any], agent_key: str, unit_id: UUID) -> MemoryDetail | None:
    """The agent's unit in full, whatever its status (the memory's view)."""
    return fetch_one(
        conn,
        MemoryDetail,
        """
        SELECT u.id, u.text, u.context, u.fact_type, u.category, u.importance, u.event_date,
               u.occurred_start, u.occurred_end, u.mentioned_at, u.created_at,
               u.confidence_score, u.metadata, u.status, u.status_at, u.status_reason,
               u.superseded_by, u.supersedes, u.valid_from, u.valid_until, u.evidence_count,
               u.embedding IS NOT NULL AS embedded, d.document_id, u.item_index,
               coalesce(a.access_count, 0) AS access_count, a.last_accessed_at
        FROM memory_units u
        LEFT JOIN documents d ON d.id = u.document_pk
        LEFT JOIN memory_access a ON a.unit_id = u.id
        WHERE u.id = %s AND u.agent_id = %s
        """,
        (unit_id, agent_key),
    )


def entities_of(conn: Connection[Any], unit_id: UUID) -> list[MentionedEntity]:
    """The entities the unit names, by name."""
    return fetch_all(
        conn,
        MentionedEntity,
        "SELECT e.id, e.canonical_name AS name, e.entity_type, ue.mention "
        "FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id "
        "WHERE ue.unit_id = %s ORDER BY e.canonical_name, e.id",
        (unit_id,),
    )


def history(conn: Connection[Any], unit_id: UUID) -> list[MemoryEvent]:
    """Every audit event of the unit, oldest first."""
    return fetch_all(
        conn,
        MemoryEvent,
        "SELECT event, at, reason, actor, related_id, details FROM memory_events "
        "WHERE unit_id = %s ORDER BY at, id",
        (unit_id,),
    )


def links_of(conn: Connection[Any], unit_id: UUID, limit: int = MAX_LINKS) -> list[LinkedMemory]:
    """The unit's outgoing links (stored both ways), explicit ones first, then the strongest,
    with the other end's label and status."""
    return fetch_all(
        conn,
        LinkedMemory,
        """
        SELECT l.to_unit AS target, l.link_type AS type, l.weight, l.relationship,
               left(m.text, %s) AS label, m.status
        FROM memory_links l JOIN memory_units m ON m.id = l.to_unit
        WHERE l.from_unit = %s ORDER BY (l.link_type = 'explicit') DESC, l.weight DESC, l.to_unit
        LIMIT %s
        """,
        (LABEL_CHARS, unit_id, limit),
    )


def superseding(conn: Connection[Any], unit_id: UUID) -> list[UUID]:
    """The units this unit replaced (merged or superseded ones)."""
    return [
        r["id"]
        for r in conn.execute(
            "SELECT id FROM memory_units WHERE superseded_by = %s ORDER BY status_at", (unit_id,)
        )
    ]
