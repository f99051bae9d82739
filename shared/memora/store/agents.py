"""Agent rows: created on first use, with the default Big Five personality."""

from __future__ import annotations

from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
DEFAULT_PERSONALITY: dict[str, float] = {t: 0.5 for t in TRAITS} | {"bias_strength": 0.5}


def ensure_agent(conn: Connection[Any], agent_id: str) -> None:
    conn.execute(
        "INSERT INTO agents (agent_id) VALUES (%s) ON CONFLICT (agent_id) DO NOTHING", (agent_id,)
    )


def get_agent(conn: Connection[Any], agent_id: str) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT agent_id, personality, background, created_at, updated_at FROM agents "
        "WHERE agent_id = %s",
        (agent_id,),
    ).fetchone()


def get_or_create_agent(conn: Connection[Any], agent_id: str) -> dict[str, Any]:
    ensure_agent(conn, agent_id)
    row = get_agent(conn, agent_id)
    assert row is not None
    return row


def update_agent(
    conn: Connection[Any],
    agent_id: str,
    *,
    personality: dict[str, float] | None = None,
    background: str | None = None,
) -> dict[str, Any]:
    """Create or update; personality values are merged over the current ones."""
    ensure_agent(conn, agent_id)
    conn.execute(
        """
        UPDATE agents SET
            personality = CASE WHEN %(p)s::jsonb IS NULL THEN personality
                               ELSE personality || %(p)s::jsonb END,
            background  = COALESCE(%(b)s, background),
            updated_at  = now()
        WHERE agent_id = %(a)s
        """,
        {
            "p": Jsonb(personality) if personality is not None else None,
            "b": background,
            "a": agent_id,
        },
    )
    row = get_agent(conn, agent_id)
    assert row is not None
    return row


def list_agents(
    conn: Connection[Any], *, limit: int | None = None, offset: int = 0
) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT agent_id, personality, background, created_at, updated_at FROM agents "
        "ORDER BY agent_id LIMIT %s OFFSET %s",
        (limit, offset),
    ).fetchall()


def replace_background(
    conn: Connection[Any], agent_id: str, expected: str, background: str
) -> bool:
    """Compare-and-set: False when the background changed since it was read as `expected`."""
    cur = conn.execute(
        "UPDATE agents SET background = %s, updated_at = now() "
        "WHERE agent_id = %s AND background = %s",
        (background, agent_id, expected),
    )
    return cur.rowcount == 1


def delete_agent(conn: Connection[Any], agent_id: str) -> bool:
    """Hard delete: documents and units cascade; entities and operations go explicitly."""
    conn.execute("DELETE FROM memory_units WHERE agent_id = %s", (agent_id,))
    conn.execute("DELETE FROM entities WHERE agent_id = %s", (agent_id,))
    conn.execute("DELETE FROM operations WHERE agent_id = %s", (agent_id,))
    cur = conn.execute("DELETE FROM agents WHERE agent_id = %s", (agent_id,))
    return cur.rowcount > 0
