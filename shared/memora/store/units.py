"""memory_units: the write side's SQL (the pipeline's stages, opinions, deletes).

The read path's search queries (HNSW, BM25, graph steps, candidate hydration) live with the
retrievers in `memora.retrieval.arms` and `memora.retrieval.arms.keyword`: they are the search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.basics.models import utcnow
from memora.extraction.base import Fact
from memora.store.rows import fetch_all, fetch_one

_COPY_COLUMNS = (
    "id, agent_id, document_pk, item_index, seq, text, context, fact_type, event_date, "
    "occurred_start, occurred_end, mentioned_at, confidence_score, mentions, relations, "
    "metadata, created_at, importance, category, entity_relations"
)


@dataclass(frozen=True)
class UnitText:
    """A unit to embed (`to_embed`)."""

    id: UUID
    text: str


@dataclass(frozen=True)
class Unembedded:
    """A unit left without an embedding, and its document (`unembedded`)."""

    id: UUID
    document_pk: UUID


@dataclass(frozen=True)
class Unresolved:
    """A unit as entity resolution reads it (`for_entities`): `mentions` are those the
    extractor recorded ({"name", "entity_type"} each), None where it recorded none."""

    id: UUID
    text: str
    event_date: datetime
    mentions: list[dict[str, str]] | None
    entity_relations: list[dict[str, str]] | None = None  # the LLM extractor's


@dataclass(frozen=True)
class OpinionHead:
    """The newest version of an opinion's history (`opinion_head`)."""

    id: UUID
    confidence_score: float | None


@dataclass(frozen=True)
class NearestOpinion(OpinionHead):
    """A current opinion with its cosine similarity to the vector asked about."""

    similarity: float


@dataclass(frozen=True)
class Opinion:
    """A version of an opinion as the opinion queries list it (`current_opinions`)."""

    id: UUID
    text: str
    confidence: float | None
    event_date: datetime  # when it was formed
    supersedes: UUID | None  # the version it revised
    metadata: dict[str, Any]


@dataclass(frozen=True)
class HistoricOpinion(Opinion):
    """A version in an opinion's history (`opinion_history`): `depth` counts versions from the
    one asked about (0), older ones negative."""

    depth: int


class OpinionState(NamedTuple):
    """An opinion's confidence and whether a later version revised it (`opinion_state`)."""

    confidence: float | None
    superseded: bool  # a later version revised it


def _row(unit_id: UUID, agent_id: str, document_pk: UUID | None, f: Fact) -> tuple[Any, ...]:
    mentions = (
        Jsonb([{"name": m.name, "entity_type": m.entity_type} for m in f.mentions])
        if f.mentions is not None
        else None
    )
    relations = (
        Jsonb(
            [
                {"target_item": r.target_item, "target_seq": r.target_seq, "relation": r.relation}
                for r in f.relations
            ]
        )
        if f.relations
        else None
    )
    return (
        unit_id,
        agent_id,
        document_pk,
        f.item_index,
        f.seq,
        f.text,
        f.context,
        f.fact_type,
        f.event_date,
        f.occurred_start,
        f.occurred_end,
        f.mentioned_at,
        f.confidence,
        mentions,
        relations,
        Jsonb(f.metadata),
        utcnow(),
        f.importance if f.importance is not None else 5.0,
        f.category,
        Jsonb([{"subject": a, "relation": r, "object": b} for a, r, b in f.entity_relations])
        if f.entity_relations
        else None,
    )


def insert_facts(
    conn: Connection[Any], agent_id: str, document_pk: UUID | None, facts: Sequence[Fact]
) -> list[UUID]:
    """Bulk insert with COPY; returns the new unit ids in order."""
    if not facts:
        return []
    ids: list[UUID] = [
        r["id"]
        for r in conn.execute(
            "SELECT gen_random_uuid() AS id FROM generate_series(1, %s)", (len(facts),)
        ).fetchall()
    ]
    with conn.cursor() as cur, cur.copy(f"COPY memory_units ({_COPY_COLUMNS}) FROM STDIN") as copy:
        for unit_id, fact in zip(ids, facts, strict=True):
            copy.write_row(_row(unit_id, agent_id, document_pk, fact))
    return ids


def delete_claimed(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> int:
    """Delete the document's units whose every source is a message this operation claims (or
    that have no source left): what its extraction replaces. Their links, entity references
    and access counts go with them by foreign key; the number deleted."""
    cur = conn.execute(
        """
        DELETE FROM memory_units u WHERE u.document_pk = %(d)s AND NOT EXISTS (
            SELECT 1 FROM unit_sources s JOIN conversation_messages m ON m.id = s.message_pk
            WHERE s.unit_id = u.id AND m.extracted_by IS DISTINCT FROM %(o)s)
        """,
        {"d": document_pk, "o": operation_id},
    )
    return max(cur.rowcount, 0)


def to_embed(conn: Connection[Any], document_pk: UUID) -> list[UnitText]:
    """The document's units without an embedding, in document order."""
    return fetch_all(
        conn,
        UnitText,
        "SELECT id, text FROM memory_units WHERE document_pk = %s AND embedding IS NULL "
        "ORDER BY item_index, seq",
        (document_pk,),
    )


def unembedded(conn: Connection[Any], agent_key: str | None, limit: int) -> list[Unembedded]:
    """Units of a document left without an embedding although no operation is working on it."""
    agent = " AND u.agent_id = %(a)s" if agent_key is not None else ""
    return fetch_all(
        conn,
        Unembedded,
        f"""
        SELECT u.id, u.document_pk FROM memory_units u
        WHERE u.embedding IS NULL AND u.document_pk IS NOT NULL{agent}
          AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.document_pk = u.document_pk
                          AND o.status IN ('queued', 'running'))
        LIMIT %(n)s
        """,
        {"a": agent_key, "n": limit},
    )


def set_embeddings(conn: Connection[Any], rows: Sequence[tuple[np.ndarray, UUID]]) -> None:
    """(vector, unit id) pairs."""
    with conn.cursor() as cur:
        cur.executemany("UPDATE memory_units SET embedding = %s WHERE id = %s", rows)


# Limits a query on a document's units to those from the messages an operation claims.
_CLAIMED = (
    " AND id IN (SELECT s.unit_id FROM unit_sources s JOIN conversation_messages m"
    " ON m.id = s.message_pk WHERE m.document_pk = %(d)s AND m.extracted_by = %(o)s)"
)


def for_entities(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> list[Unresolved]:
    """The units of the messages this operation claims, with what entity resolution reads,
    in document order."""
    return fetch_all(
        conn,
        Unresolved,
        "SELECT id, text, event_date, mentions, entity_relations FROM memory_units "
        "WHERE document_pk = %(d)s" + _CLAIMED + " ORDER BY item_index, seq",
        {"d": document_pk, "o": operation_id},
    )


def said_after(
    conn: Connection[Any], agent_id: str, after: tuple[datetime, UUID] | None, limit: int
) -> list[Unresolved]:
    """Up to `limit` of the agent's units said after `after` (event_date, id), in that order
    (the agent's index by date): a job reading stored memories again."""
    said, last = after if after else (None, None)
    return fetch_all(
        conn,
        Unresolved,
        "SELECT id, text, event_date, mentions, entity_relations FROM memory_units "
        "WHERE agent_id = %(agent)s "
        "AND (%(said)s::timestamptz IS NULL OR (event_date, id) > (%(said)s, %(id)s)) "
        "ORDER BY event_date, id LIMIT %(limit)s",
        {"agent": agent_id, "said": said, "id": last, "limit": limit},
    )


def ids_for_document(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> list[UUID]:
    """The units of the messages this operation claims."""
    return [
        r["id"]
        for r in conn.execute(
            "SELECT id FROM memory_units WHERE document_pk = %(d)s" + _CLAIMED,
            {"d": document_pk, "o": operation_id},
        )
    ]


# ------------------------------------------------------------------------------ opinions
def lock_opinions(conn: Connection[Any], agent_id: str) -> None:
    """Serialise opinion writes of one agent until the transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"opinions:{agent_id}",))


def set_opinion_vector(
    conn: Connection[Any], unit_id: UUID, vector: np.ndarray, supersedes: UUID | None
) -> None:
    conn.execute(
        "UPDATE memory_units SET embedding = %s, supersedes = %s WHERE id = %s",
        (vector, supersedes, unit_id),
    )


def opinion_head(conn: Connection[Any], agent_id: str, opinion_id: UUID) -> OpinionHead | None:
    """The newest version of the history `opinion_id` belongs to."""
    return fetch_one(
        conn,
        OpinionHead,
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
        (opinion_id, agent_id),
    )


def nearest_current_opinion(
    conn: Connection[Any], agent_id: str, vector: np.ndarray
) -> NearestOpinion | None:
    """The agent's current opinion most similar to `vector`; forgotten or archived opinions are
    not reinforced."""
    return fetch_one(
        conn,
        NearestOpinion,
        """
        SELECT m.id, m.confidence_score, 1 - (v.embedding <=> %(v)s::halfvec) AS similarity
        FROM memory_vectors v JOIN memory_units m ON m.id = v.unit_id
        WHERE v.agent_id = %(a)s AND v.fact_type = 'opinion'
          AND NOT EXISTS (SELECT 1 FROM memory_units n WHERE n.supersedes = m.id)
        ORDER BY v.embedding <=> %(v)s::halfvec LIMIT 1
        """,
        {"v": vector, "a": agent_id},
    )


_OPINION_COLUMNS = (
    "u.id, u.text, u.confidence_score AS confidence, u.event_date, u.supersedes, u.metadata"
)


def opinion_history(
    conn: Connection[Any], agent_key: str, opinion_id: UUID
) -> list[HistoricOpinion]:
    """Every version of the opinion's history, oldest first; [] when it is not this agent's."""
    return fetch_all(
        conn,
        HistoricOpinion,
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
        {"id": opinion_id, "a": agent_key},
    )


def current_opinions(
    conn: Connection[Any], agent_key: str, *, limit: int, offset: int
) -> list[Opinion]:
    """The agent's active opinions that no later version supersedes, newest first."""
    return fetch_all(
        conn,
        Opinion,
        f"""
        SELECT {_OPINION_COLUMNS} FROM memory_units u
        WHERE u.agent_id = %s AND u.fact_type = 'opinion' AND u.status = 'active'
          AND NOT EXISTS (SELECT 1 FROM memory_units n WHERE n.supersedes = u.id)
        ORDER BY u.event_date DESC, u.id LIMIT %s OFFSET %s
        """,
        (agent_key, limit, offset),
    )


def opinion_state(
    conn: Connection[Any], agent_key: str, ids: Sequence[UUID]
) -> dict[UUID, OpinionState]:
    """The state of the agent's opinions among `ids`; other ids are left out."""
    if not ids:
        return {}
    rows = conn.execute(
        """
        SELECT u.id, u.confidence_score,
               EXISTS (SELECT 1 FROM memory_units n WHERE n.supersedes = u.id) AS superseded
        FROM memory_units u WHERE u.id = ANY(%s) AND u.agent_id = %s
        """,
        (list(ids), agent_key),
    ).fetchall()
    return {r["id"]: OpinionState(r["confidence_score"], r["superseded"]) for r in rows}


def schema_embedding_dim(conn: Connection[Any]) -> int | None:
    """The dimension the schema gave memory_units.embedding (pgvector keeps it as the column's
    type modifier; MEMORA_EMBEDDING_DIM at `memora migrate`); None when it has none."""
    row = conn.execute(
        "SELECT atttypmod AS dim FROM pg_attribute "
        "WHERE attrelid = 'memory_units'::regclass AND attname = 'embedding'"
    ).fetchone()
    dim = int(row["dim"]) if row else -1
    return dim if dim > 0 else None
