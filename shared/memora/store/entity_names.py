"""The SQL of the entity_names job (memora.jobs.entity_names): an agent's entities in creation
order, and renaming, merging and removing them with their references."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.basics.turns import SPEAKER_PREFIX
from memora.store.entities import NAMED_TYPES
from memora.store.evolution import Position


@dataclass(frozen=True)
class StoredEntity:
    id: UUID
    created_at: datetime
    canonical_name: str
    normalized_name: str
    aliases: list[str]
    name_counts: dict[str, int]
    entity_type: str
    mention_count: int

    @property
    def position(self) -> Position:
        return Position(self.created_at, self.id)

    def counts(self) -> dict[str, int]:
        """Its forms with their counts (an entity older than the counts: its name alone)."""
        return dict(self.name_counts) or {self.canonical_name: max(self.mention_count, 1)}


@dataclass(frozen=True)
class Names:
    canonical: str
    normalized: str
    aliases: list[str]
    counts: Mapping[str, int]
    entity_type: str


_COLUMNS = (
    "id, created_at, canonical_name, normalized_name, aliases, name_counts, entity_type, "
    "mention_count"
)


def batch(
    conn: Connection[Any], agent_key: str, after: Position | None, limit: int
) -> list[StoredEntity]:
    """Up to `limit` of the agent's entities after `after` in creation order."""
    created, last = (after.created_at, after.id) if after else (None, None)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM entities WHERE agent_id = %(agent)s "
        "AND (%(created)s::timestamptz IS NULL OR (created_at, id) > (%(created)s, %(id)s)) "
        "ORDER BY created_at, id LIMIT %(limit)s",
        {"agent": agent_key, "created": created, "id": last, "limit": limit},
    ).fetchall()
    return [StoredEntity(**r) for r in rows]


# A memory's speaker, as the entities stage reads it (memora.entities.resolution)
_SPEAKER = SPEAKER_PREFIX


def speakers(conn: Connection[Any], agent_key: str, limit: int = 1000) -> list[str]:
    """The speakers named by the agent's memories ("Name: " prefixes)."""
    rows = conn.execute(
        "SELECT DISTINCT substring(text FROM %s) AS speaker FROM memory_units "
        "WHERE agent_id = %s AND text ~ %s LIMIT %s",
        (_SPEAKER, agent_key, _SPEAKER, limit),
    ).fetchall()
    return [r["speaker"] for r in rows]


def get(conn: Connection[Any], entity_id: UUID) -> StoredEntity | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM entities WHERE id = %s", (entity_id,)).fetchone()
    return StoredEntity(**row) if row else None


def namesake(
    conn: Connection[Any], agent_key: str, entity_id: UUID, entity_type: str, key: str
) -> StoredEntity | None:
    """Another entity of the agent known under `key`, of the type (or, for a named type, of
    any named type, as entity resolution matches); the most mentioned. Planned for its agent
    (a large agent's plan ORs the name and alias indexes, migration 0039)."""
    named = list(NAMED_TYPES) if entity_type in NAMED_TYPES else [entity_type]
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM entities WHERE agent_id = %s AND id <> %s "
        "AND entity_type = ANY(%s) AND (normalized_name = %s OR aliases @> ARRAY[%s]) "
        "ORDER BY mention_count DESC, created_at, id LIMIT 1",
        (agent_key, entity_id, named, key, key),
        prepare=False,
    ).fetchone()
    return StoredEntity(**row) if row else None


def rename(conn: Connection[Any], entity_id: UUID, names: Names) -> None:
    conn.execute(
        "UPDATE entities SET canonical_name = %s, normalized_name = %s, aliases = %s, "
        "name_counts = %s, entity_type = %s WHERE id = %s",
        (
            names.canonical,
            names.normalized,
            names.aliases,
            Jsonb(dict(names.counts)),
            names.entity_type,
            entity_id,
        ),
    )


def clean_mentions(
    conn: Connection[Any], entity_id: UUID, cleaned: Sequence[tuple[str, str]]
) -> None:
    """Rewrite the entity's references' mention texts: (old form, clean form) pairs."""
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE unit_entities SET mention = %s WHERE entity_id = %s AND mention = %s",
            [(new, entity_id, old) for old, new in cleaned if new != old],
        )


def merge(conn: Connection[Any], source: UUID, target: UUID, names: Names) -> None:
    """Move source's references, entity links and relations to target, then delete source;
    target takes `names`, the earliest and latest sightings of both and its count of active
    memories."""
    conn.execute(
        """
        UPDATE unit_entities SET entity_id = %(target)s WHERE entity_id = %(source)s
          AND unit_id NOT IN (SELECT unit_id FROM unit_entities WHERE entity_id = %(target)s)
        """,
        {"source": source, "target": target},
    )
    conn.execute("UPDATE memory_links SET entity_id = %s WHERE entity_id = %s", (target, source))
    # relations move too (one between the two goes with source: an entity is not its own kin)
    for end, other in (("subject_id", "object_id"), ("object_id", "subject_id")):
        conn.execute(
            f"UPDATE entity_relations SET {end} = %(target)s "
            f"WHERE {end} = %(source)s AND {other} <> %(target)s",
            {"source": source, "target": target},
        )
    conn.execute(
        """
        UPDATE entities t SET first_seen = LEAST(t.first_seen, s.first_seen),
                              last_seen = GREATEST(t.last_seen, s.last_seen)
        FROM entities s WHERE t.id = %s AND s.id = %s
        """,
        (target, source),
    )
    remove(conn, source)
    rename(conn, target, names)
    conn.execute(
        """
        UPDATE entities SET mention_count = (
            SELECT count(*) FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id
            WHERE ue.entity_id = %(id)s AND u.status = 'active')
        WHERE id = %(id)s
        """,
        {"id": target},
    )


def remove(conn: Connection[Any], entity_id: UUID) -> None:
    """Delete an entity with its references and entity links (ON DELETE CASCADE)."""
    conn.execute("DELETE FROM entities WHERE id = %s", (entity_id,))
