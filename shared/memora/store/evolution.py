"""The evolution jobs' SQL (seed 002 §4.5): which agents to visit, the statements consolidation
compares, memories fading below their retention, forgotten ones past it, links and entities to
prune, mention counts to refresh, the importance gathered since the last reflection, and each
job's cursor. The lifecycle's own reads and writes are in `store.lifecycle`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.basics.stages import OperationKind, Stage
from memora.store.lifecycle import STATEMENT_TYPES, ActiveUnit
from memora.store.operations import create_operation_for_key
from memora.store.purge import purge_units
from memora.store.rows import fetch_all


@dataclass(frozen=True)
class FadingUnit:
    """Attenuation's candidate: its importance and last access (or creation) (`fading`)."""

    id: UUID
    importance: float
    last_used: datetime


@dataclass(frozen=True)
class Position:
    """Where a job stopped in its order: the last row it read (`job_cursors`), by creation
    time (or, for a job going in the order memories were said, their event date) and id."""

    created_at: datetime
    id: UUID

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Position:
        return cls(datetime.fromisoformat(value["created_at"]), UUID(value["id"]))

    def to_json(self) -> dict[str, Any]:
        return {"created_at": self.created_at.isoformat(), "id": str(self.id)}


def agent_keys(conn: Connection[Any], only: str | None) -> list[str]:
    if only is not None:
        return [only]
    return [r["agent_id"] for r in conn.execute("SELECT agent_id FROM agents ORDER BY agent_id")]


def expired(
    conn: Connection[Any], agent_key: str, status: str, before: datetime, limit: int
) -> list[UUID]:
    """The agent's memories that took `status` (forgotten, archived) before `before`: past
    their retention, oldest first."""
    return [
        r["id"]
        for r in conn.execute(
            "SELECT id FROM memory_units WHERE status = %s AND status_at < %s "
            "AND agent_id = %s ORDER BY status_at, id LIMIT %s",
            (status, before, agent_key, limit),
        )
    ]


def agent_limits(conn: Connection[Any], agent_key: str) -> dict[str, Any]:
    """The limits the agent set for itself (memora.lifecycle.limits resolves the rest)."""
    row = conn.execute("SELECT limits FROM agents WHERE agent_id = %s", (agent_key,)).fetchone()
    return dict(row["limits"]) if row else {}


# What each limit counts: active reflections, or every other active unit but opinions (which
# attenuation leaves alone too: they are the agent's beliefs, revised by think).
_OF_KIND = (
    "CASE WHEN %(r)s THEN u.fact_type = 'reflection' "
    "ELSE u.fact_type NOT IN ('reflection', 'opinion') END"
)


def count_active(conn: Connection[Any], agent_key: str, *, reflections: bool) -> int:
    row = conn.execute(
        f"SELECT count(*) AS n FROM memory_units u WHERE u.agent_id = %(a)s "
        f"AND u.status = 'active' AND {_OF_KIND}",
        {"a": agent_key, "r": reflections},
    ).fetchone()
    return int(row["n"]) if row else 0


def count_entities(conn: Connection[Any], agent_key: str) -> int:
    row = conn.execute(
        "SELECT count(*) AS n FROM entities WHERE agent_id = %s", (agent_key,)
    ).fetchone()
    return int(row["n"]) if row else 0


def remove_weakest_entities(conn: Connection[Any], agent_key: str, limit: int) -> list[str]:
    """Delete the agent's `limit` least mentioned entities (ties: seen least recently), with
    their mentions and the entity links drawn through them (ON DELETE CASCADE); their names."""
    rows = conn.execute(
        """
        DELETE FROM entities WHERE id IN (
            SELECT id FROM entities WHERE agent_id = %s
            ORDER BY mention_count, last_seen NULLS FIRST, id LIMIT %s)
        RETURNING canonical_name
        """,
        (agent_key, limit),
    ).fetchall()
    return [r["canonical_name"] for r in rows]


def lowest_retention(
    conn: Connection[Any],
    agent_key: str,
    *,
    reflections: bool,
    now: datetime,
    rate: float,
    limit: int,
) -> list[FadingUnit]:
    """The agent's `limit` active memories (or reflections) of lowest retention score
    (importance · e^(−rate·days since last access), memora.lifecycle.scores.retention_score),
    lowest first; compared by its logarithm, which cannot underflow. Ties: least recently used."""
    return fetch_all(
        conn,
        FadingUnit,
        f"""
        SELECT u.id, u.importance, coalesce(a.last_accessed_at, u.created_at) AS last_used
        FROM memory_units u LEFT JOIN memory_access a ON a.unit_id = u.id
        WHERE u.agent_id = %(a)s AND u.status = 'active' AND {_OF_KIND}
        ORDER BY ln(greatest(u.importance, 1e-6)) - %(rate)s * greatest(0, extract(epoch FROM
                 %(now)s - coalesce(a.last_accessed_at, u.created_at))::float8 / 86400),
                 last_used, u.id
        LIMIT %(k)s
        """,
        {"a": agent_key, "r": reflections, "now": now, "rate": rate, "k": limit},
    )


def purge(conn: Connection[Any], ids: Sequence[UUID]) -> dict[str, int]:
    """Delete these units for real (links, entity references, access counts, embeddings)."""
    return purge_units(conn, "SELECT unnest(%(ids)s::uuid[])", {"ids": list(ids)})


def statements_after(
    conn: Connection[Any], agent_key: str, position: Position | None, limit: int
) -> list[ActiveUnit]:
    """The agent's active statements that consolidation compares, in creation order after
    `position`: facts stated through remember or extracted by the LLM, and conversation turns
    with a speaker (episodes: never merged, but a turn stating a change supersedes)."""
    after = (position.created_at, position.id) if position is not None else (None, None)
    return fetch_all(
        conn,
        ActiveUnit,
        """
        SELECT u.id, u.text, u.embedding, u.event_date, u.created_at, u.metadata, u.importance,
               u.category,
               coalesce((SELECT array_agg(lower(ue.mention)) FROM unit_entities ue
                         WHERE ue.unit_id = u.id), '{}') AS entities
        FROM memory_units u
        WHERE u.agent_id = %(a)s AND u.status = 'active' AND u.fact_type = ANY(%(t)s)
          AND u.embedding IS NOT NULL
          AND (u.metadata->>'source' = 'remember' OR u.metadata->>'extractor' = 'llm'
               OR u.metadata ? 'speaker')
          AND (%(c)s::timestamptz IS NULL OR (u.created_at, u.id) > (%(c)s, %(i)s::uuid))
        ORDER BY u.created_at, u.id LIMIT %(k)s
        """,
        {"a": agent_key, "t": list(STATEMENT_TYPES), "c": after[0], "i": after[1], "k": limit},
    )


def fading(
    conn: Connection[Any], agent_key: str, unused_since: datetime, limit: int
) -> list[FadingUnit]:
    """Active units not accessed (nor created) since `unused_since`: attenuation's candidates,
    least recently used first."""
    return fetch_all(
        conn,
        FadingUnit,
        """
        SELECT u.id, u.importance, coalesce(a.last_accessed_at, u.created_at) AS last_used
        FROM memory_units u LEFT JOIN memory_access a ON a.unit_id = u.id
        WHERE u.agent_id = %s AND u.status = 'active' AND u.fact_type <> 'opinion'
          AND coalesce(a.last_accessed_at, u.created_at) < %s
        ORDER BY last_used, u.id LIMIT %s
        """,
        (agent_key, unused_since, limit),
    )


def importance_since_reflection(conn: Connection[Any], agent_key: str) -> tuple[float, list[UUID]]:
    """Summed importance of the agent's active memories created since its last reflection, and
    their ids (most important first, at most 200)."""
    rows = conn.execute(
        """
        SELECT u.id, u.importance FROM memory_units u
        WHERE u.agent_id = %(a)s AND u.status = 'active' AND u.fact_type <> 'reflection'
          AND u.created_at > coalesce((SELECT max(created_at) FROM memory_units
                                       WHERE agent_id = %(a)s AND fact_type = 'reflection'),
                                      '-infinity')
        ORDER BY u.importance DESC, u.created_at DESC
        """,
        {"a": agent_key},
    ).fetchall()
    return float(sum(r["importance"] for r in rows)), [r["id"] for r in rows[:200]]


def prune_links(conn: Connection[Any], agent_key: str, below: float, limit: int) -> int:
    """Delete up to `limit` of the agent's generated links weaker than `below` (explicit and
    reflection links are kept)."""
    if below <= 0:
        return 0
    cur = conn.execute(
        """
        DELETE FROM memory_links l USING (
            SELECT l2.from_unit, l2.to_unit, l2.link_type FROM memory_links l2
            JOIN memory_units m ON m.id = l2.from_unit
            WHERE m.agent_id = %s AND l2.weight < %s
              AND l2.link_type NOT IN ('explicit', 'reflection')
            LIMIT %s
        ) w
        WHERE l.from_unit = w.from_unit AND l.to_unit = w.to_unit AND l.link_type = w.link_type
        """,
        (agent_key, below, limit),
    )
    return max(cur.rowcount, 0)


def refresh_mention_counts(conn: Connection[Any], agent_key: str, limit: int) -> int:
    """Set up to `limit` of the agent's entities' mention counts to the number of active
    memories that mention them (co-occurrence scores read these counts)."""
    cur = conn.execute(
        """
        UPDATE entities e SET mention_count = c.n FROM (
            SELECT e2.id, count(u.id) AS n FROM entities e2
            LEFT JOIN unit_entities ue ON ue.entity_id = e2.id
            LEFT JOIN memory_units u ON u.id = ue.unit_id AND u.status = 'active'
            WHERE e2.agent_id = %s GROUP BY e2.id HAVING count(u.id) <> max(e2.mention_count)
            LIMIT %s
        ) c WHERE e.id = c.id
        """,
        (agent_key, limit),
    )
    return max(cur.rowcount, 0)


def agents_not_at(
    conn: Connection[Any], job: str, position: Position, only: str | None
) -> list[str]:
    """The agents (or `only`) whose cursor of `job` is not at `position` (a job's end)."""
    return [
        r["agent_id"]
        for r in conn.execute(
            "SELECT a.agent_id FROM agents a LEFT JOIN job_cursors c "
            "ON c.job = %(job)s AND c.agent_id = a.agent_id "
            "WHERE c.position IS DISTINCT FROM %(at)s::jsonb "
            "AND (%(only)s::text IS NULL OR a.agent_id = %(only)s) ORDER BY a.agent_id",
            {"job": job, "at": Jsonb(position.to_json()), "only": only},
        )
    ]


def get_cursor(conn: Connection[Any], job: str, agent_key: str) -> Position | None:
    row = conn.execute(
        "SELECT position FROM job_cursors WHERE job = %s AND agent_id = %s", (job, agent_key)
    ).fetchone()
    return Position.from_json(row["position"]) if row else None


def set_cursor(conn: Connection[Any], job: str, agent_key: str, position: Position | None) -> None:
    if position is None:
        conn.execute("DELETE FROM job_cursors WHERE job = %s AND agent_id = %s", (job, agent_key))
        return
    conn.execute(
        "INSERT INTO job_cursors (job, agent_id, position) VALUES (%s, %s, %s) "
        "ON CONFLICT (job, agent_id) DO UPDATE SET position = EXCLUDED.position, "
        "updated_at = now()",
        (job, agent_key, Jsonb(position.to_json())),
    )


def create_evolve(conn: Connection[Any], agent_key: str, reason: str) -> UUID:
    """An `evolve` operation: the agent's consolidation (and reflection) now (the caller commits,
    then hands off its stage)."""
    return create_operation_for_key(
        conn,
        agent_key,
        kind=OperationKind.EVOLVE,
        first_stage=Stage.EVOLVE,
        payload={"priority": "live", "reason": reason},
    )


def evolve_when_finished(conn: Connection[Any], operation_id: UUID) -> bool:
    """Marks an operation still in flight to request an `evolve` of its agent when it finishes
    (`payload.end_of_conversation`); False when it is over already."""
    row = conn.execute(
        "UPDATE operations SET payload = payload || '{\"end_of_conversation\": true}'::jsonb "
        "WHERE id = %s AND status IN ('queued', 'running') RETURNING id",
        (operation_id,),
    ).fetchone()
    return row is not None
