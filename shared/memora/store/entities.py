"""entities and unit_entities: the SQL of entity resolution and of orphan cleanup."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

NAMED_TYPES = ("PERSON", "ORGANIZATION", "LOCATION", "PRODUCT")


def lock_agent(conn: Connection[Any], agent_id: str) -> None:
    """Serialise resolution for one agent until the transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"entities:{agent_id}",))


def known_names(conn: Connection[Any], agent_id: str, limit: int) -> list[dict[str, Any]]:
    """The agent's most mentioned named entities (canonical_name, entity_type)."""
    return conn.execute(
        "SELECT canonical_name, entity_type FROM entities WHERE agent_id = %s "
        "AND entity_type = ANY(%s) AND length(canonical_name) > 2 "
        "ORDER BY mention_count DESC LIMIT %s",
        (agent_id, list(NAMED_TYPES), limit),
    ).fetchall()


def candidates(conn: Connection[Any], agent_id: str, names: Sequence[str]) -> list[dict[str, Any]]:
    """Entities whose normalised name or alias equals, or is trigram-similar to, a name.
    Planned for its agent each time (a large agent's plan ORs the name, alias and trigram
    indexes, a small one's reads its few entities; migrations 0039, 0040)."""
    return conn.execute(
        """
        SELECT DISTINCT e.id, e.normalized_name, e.aliases, e.entity_type, e.last_seen, e.traits
        FROM unnest(%s::text[]) AS m(name)
        JOIN LATERAL (
            SELECT id, normalized_name, aliases, entity_type, last_seen, traits FROM entities
            WHERE agent_id = %s AND (normalized_name = m.name OR aliases @> ARRAY[m.name]
                                     OR normalized_name %% m.name)
            LIMIT 25
        ) e ON true
        """,
        (list(names), agent_id),
        prepare=False,
    ).fetchall()


def people(
    conn: Connection[Any], agent_id: str, firsts: Sequence[str], lasts: Sequence[str]
) -> list[dict[str, Any]]:
    """PERSON entities one of whose names (normalised or alias) begins with one of `firsts` or
    ends with one of `lasts` (nicknames and short forms, memora.nlp.person_names): their
    `memora_name_ends` (migration 0040) share one, planned for the agent each time."""
    if not firsts and not lasts:
        return []
    ends = [f"<{f}" for f in firsts] + [f">{la}" for la in lasts]
    return conn.execute(
        """
        SELECT id, normalized_name, aliases, entity_type, last_seen, traits FROM entities
        WHERE agent_id = %s AND entity_type = 'PERSON'
          AND memora_name_ends(normalized_name, aliases) && %s::text[]
        LIMIT 200
        """,
        (agent_id, ends),
        prepare=False,
    ).fetchall()


def shared_memory_counts(
    conn: Connection[Any], entity_ids: Sequence[UUID], co_names: Sequence[str]
) -> dict[UUID, int]:
    """For each entity: how many of its memories also name one of `co_names`."""
    if not entity_ids or not co_names:
        return {}
    rows = conn.execute(
        """
        SELECT a.entity_id, count(DISTINCT a.unit_id) AS n
        FROM unit_entities a
        JOIN unit_entities b ON b.unit_id = a.unit_id AND b.entity_id <> a.entity_id
        JOIN entities e ON e.id = b.entity_id
        WHERE a.entity_id = ANY(%s)
          AND (e.normalized_name = ANY(%s) OR e.aliases && %s)
        GROUP BY a.entity_id
        """,
        (list(entity_ids), list(co_names), list(co_names)),
    ).fetchall()
    return {r["entity_id"]: r["n"] for r in rows}


def create(
    conn: Connection[Any],
    agent_id: str,
    canonical_name: str,
    normalized_name: str,
    entity_type: str,
    seen: datetime,
) -> UUID:
    row = conn.execute(
        """
        INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type,
                              first_seen, last_seen)
        VALUES (%s, %s, %s, %s, %s, %s) RETURNING id
        """,
        (agent_id, canonical_name, normalized_name, entity_type, seen, seen),
    ).fetchone()
    assert row is not None
    entity_id: UUID = row["id"]
    return entity_id


def add_alias(conn: Connection[Any], entity_id: UUID, alias: str) -> None:
    conn.execute(
        "UPDATE entities SET aliases = array_append(aliases, %s) WHERE id = %s", (alias, entity_id)
    )


def set_traits(conn: Connection[Any], traits: Sequence[tuple[UUID, dict[str, int]]]) -> None:
    """Store what has been read of these entities (memora.entities.traits)."""
    if traits:
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE entities SET traits = %s WHERE id = %s",
                [(Jsonb(t), entity_id) for entity_id, t in traits],
            )


def unlink_units(conn: Connection[Any], unit_ids: Sequence[UUID]) -> None:
    """Forget the entity references of these units (before resolving them again)."""
    conn.execute("DELETE FROM unit_entities WHERE unit_id = ANY(%s)", (list(unit_ids),))


# The entity's surface forms with their counts after some mentions: its stored counts plus
# those of `s` (this batch's (entity, mention, n)); `top` is the most frequent (ties: longer).
_MERGED_NAMES = """
    SELECT t.entity_id, jsonb_object_agg(kv.name, kv.n) AS counts,
           (array_agg(kv.name ORDER BY kv.n DESC, length(kv.name) DESC,
                      kv.name COLLATE "C"))[1] AS top
    FROM (SELECT DISTINCT entity_id FROM s) t
    JOIN entities e ON e.id = t.entity_id
    CROSS JOIN LATERAL (
        SELECT f.name, sum(f.n)::int AS n FROM (
            SELECT key AS name, value::int AS n FROM jsonb_each_text(e.name_counts)
            UNION ALL SELECT s.mention, s.n FROM s WHERE s.entity_id = e.id
        ) f GROUP BY f.name
    ) kv
    GROUP BY t.entity_id
"""


def link_units(
    conn: Connection[Any], links: Sequence[tuple[UUID, UUID, str]], unit_ids: Sequence[UUID]
) -> None:
    """Write (unit, entity, mention) references and refresh the entities' counts (all and per
    surface form), first and last sightings, and display name (the most frequent form) from
    the units just linked."""
    if not links:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO unit_entities (unit_id, entity_id, mention) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            links,
        )
    conn.execute(
        f"""
        WITH s AS (
            SELECT ue.entity_id, ue.mention, count(*)::int AS n, min(u.event_date) AS first_seen,
                   max(u.event_date) AS last_seen
            FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id
            WHERE ue.unit_id = ANY(%s)
            GROUP BY ue.entity_id, ue.mention
        ), names AS ({_MERGED_NAMES})
        UPDATE entities e SET
            mention_count = e.mention_count + a.n,
            first_seen = LEAST(e.first_seen, a.first_seen),
            last_seen = GREATEST(e.last_seen, a.last_seen),
            name_counts = names.counts,
            canonical_name = names.top
        FROM (
            SELECT entity_id, sum(n)::int AS n, min(first_seen) AS first_seen,
                   max(last_seen) AS last_seen
            FROM s GROUP BY entity_id
        ) a JOIN names ON names.entity_id = a.entity_id
        WHERE e.id = a.entity_id
        """,
        (list(unit_ids),),
    )


def delete_orphans(conn: Connection[Any], agent_key: str) -> int:
    """Delete the agent's entities that no memory mentions any more."""
    cur = conn.execute(
        """
        DELETE FROM entities e WHERE e.agent_id = %s
          AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.entity_id = e.id)
        """,
        (agent_key,),
    )
    return max(cur.rowcount, 0)
