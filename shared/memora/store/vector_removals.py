"""The agents' vector removals (`vector_removals`, migration 0024_vector_changes): one row per
agent a statement took a searchable vector away from, or changed a filter column of, with its
transaction's id; and the tenants' link removals (`link_removals`, 0026_link_changes): one row
per tenant a statement deleted links of or brought a unit back to active in. A reader needs
only the latest of each, so the older ones are dropped."""

from __future__ import annotations

from typing import Any

from psycopg import Connection


def compact(conn: Connection[Any], agent_key: str | None) -> int:
    """Keep only the latest removal of each agent (all, or the one stored under
    `agent_key`); the rows dropped."""
    return conn.execute(
        """
        DELETE FROM vector_removals v
        WHERE (%(agent)s::text IS NULL OR v.agent_id = %(agent)s)
          AND v.removed < (SELECT max(w.removed) FROM vector_removals w
                           WHERE w.agent_id = v.agent_id)
        """,
        {"agent": agent_key},
    ).rowcount


def compact_links(conn: Connection[Any]) -> int:
    """Keep only the latest link removal of each tenant; the rows dropped."""
    return conn.execute(
        """
        DELETE FROM link_removals v
        WHERE v.removed < (SELECT max(w.removed) FROM link_removals w
                           WHERE w.tenant_id = v.tenant_id)
        """
    ).rowcount
