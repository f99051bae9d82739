"""Agent rows: created on first use, with the default Big Five personality.

Every function takes the caller's `Scope` and the client's agent id; the stored key and the
tenant come from the scope, and rows come back with the client's agent id.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.basics.tenancy import Scope
from memora.store.purge import purge_agents

TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
DEFAULT_PERSONALITY: dict[str, float] = {t: 0.5 for t in TRAITS} | {"bias_strength": 0.5}
_COLUMNS = "agent_id, personality, background, limits, created_at, updated_at"


def _client(scope: Scope, row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is not None:
        row["agent_id"] = scope.agent_id(row["agent_id"])
    return row


def ensure_agent(conn: Connection[Any], scope: Scope, agent_id: str) -> None:
    """Create the agent if needed and hold a key-share lock on its row until the transaction
    ends, so a concurrent `delete_agent` cannot remove it under the caller's writes (the delete
    waits; or, if it got there first, the row is made again)."""
    key = scope.key(agent_id)
    for _ in range(3):
        locked = conn.execute(  # an agent that exists: one statement
            "SELECT 1 FROM agents WHERE agent_id = %s AND tenant_id = %s FOR KEY SHARE",
            (key, scope.tenant_id),
        ).fetchone()
        if locked is not None:
            return
        conn.execute(
            "INSERT INTO agents (agent_id, tenant_id) VALUES (%s, %s) "
            "ON CONFLICT (agent_id) DO NOTHING",
            (key, scope.tenant_id),
        )
    raise RuntimeError(f"agent {agent_id!r} kept being deleted while it was created")


def get_agent(conn: Connection[Any], scope: Scope, agent_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM agents WHERE agent_id = %s AND tenant_id = %s",
        (scope.key(agent_id), scope.tenant_id),
    ).fetchone()
    return _client(scope, row)


def get_or_create_agent(conn: Connection[Any], scope: Scope, agent_id: str) -> dict[str, Any]:
    ensure_agent(conn, scope, agent_id)
    row = get_agent(conn, scope, agent_id)
    assert row is not None
    return row


def update_agent(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    *,
    personality: dict[str, float] | None = None,
    background: str | None = None,
    limits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create or update; personality values and limits are merged over the current ones."""
    ensure_agent(conn, scope, agent_id)
    conn.execute(
        """
        UPDATE agents SET
            personality = CASE WHEN %(p)s::jsonb IS NULL THEN personality
                               ELSE personality || %(p)s::jsonb END,
            background  = COALESCE(%(b)s, background),
            limits      = CASE WHEN %(l)s::jsonb IS NULL THEN limits
                               ELSE limits || %(l)s::jsonb END,
            updated_at  = now()
        WHERE agent_id = %(a)s AND tenant_id = %(t)s
        """,
        {
            "p": Jsonb(personality) if personality is not None else None,
            "b": background,
            "l": Jsonb(limits) if limits is not None else None,
            "a": scope.key(agent_id),
            "t": scope.tenant_id,
        },
    )
    row = get_agent(conn, scope, agent_id)
    assert row is not None
    return row


def list_agents(
    conn: Connection[Any], scope: Scope, *, limit: int | None = None, offset: int = 0
) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM agents WHERE tenant_id = %s ORDER BY agent_id LIMIT %s OFFSET %s",
        (scope.tenant_id, limit, offset),
    ).fetchall()
    for row in rows:
        _client(scope, row)
    return rows


def replace_background(
    conn: Connection[Any], scope: Scope, agent_id: str, expected: str, background: str
) -> bool:
    """Compare-and-set: False when the background changed since it was read as `expected`."""
    cur = conn.execute(
        "UPDATE agents SET background = %s, updated_at = now() "
        "WHERE agent_id = %s AND tenant_id = %s AND background = %s",
        (background, scope.key(agent_id), scope.tenant_id, expected),
    )
    return cur.rowcount == 1


def delete_agent(conn: Connection[Any], scope: Scope, agent_id: str) -> dict[str, int]:
    """Hard delete of the agent and everything of it; zero counts when it does not exist."""
    return purge_agents(conn, [scope.key(agent_id)])


def tenant_agent_keys(conn: Connection[Any], scope: Scope) -> list[str]:
    return [
        r["agent_id"]
        for r in conn.execute(
            "SELECT agent_id FROM agents WHERE tenant_id = %s", (scope.tenant_id,)
        ).fetchall()
    ]


def delete_all_agents(conn: Connection[Any], scope: Scope) -> dict[str, int]:
    """Hard delete of every agent of the scope's tenant (the tenant and its keys stay)."""
    return purge_agents(conn, tenant_agent_keys(conn, scope))
