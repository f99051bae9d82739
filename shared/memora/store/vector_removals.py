"""The agents' vector removals (`vector_removals`, migration 0024_vector_changes): one row per
agent a statement took a searchable vector away from, or changed a filter column of, with its
transaction's id; and the tenants' link removals (`link_removals`, 0026_link_changes): one row
per tenant a statement deleted links of or brought a unit back to active in. Since
0027_removed_units each row also names its units (a holder of the agent's links takes those
in place; NULL: read it whole again). A reader needs only the latest of each, so the older
ones are dropped, and the latest's units cleared: they no longer stand for the rows dropped."""

from __future__ import annotations

from typing import Any

from psycopg import Connection


def compact(conn: Connection[Any], agent_key: str | None) -> int:
    """Keep only the latest removal of each agent (all, or the one stored under
    `agent_key`), without its units; the rows dropped."""
    row = conn.execute(
        """
        WITH dropped AS (
            DELETE FROM vector_removals v
            WHERE (%(agent)s::text IS NULL OR v.agent_id = %(agent)s)
              AND v.removed < (SELECT max(w.removed) FROM vector_removals w
                               WHERE w.agent_id = v.agent_id)
            RETURNING v.agent_id
        ), cleared AS (
            UPDATE vector_removals w SET units = NULL
            WHERE w.agent_id IN (SELECT agent_id FROM dropped) AND w.units IS NOT NULL
              AND w.removed = (SELECT max(x.removed) FROM vector_removals x
                               WHERE x.agent_id = w.agent_id)
        )
        SELECT count(*) AS n FROM dropped
        """,
        {"agent": agent_key},
    ).fetchone()
    return int(row["n"]) if row else 0


def compact_links(conn: Connection[Any]) -> int:
    """Keep only the latest link removal of each tenant, without its units; the rows
    dropped."""
    row = conn.execute(
        """
        WITH dropped AS (
            DELETE FROM link_removals v
            WHERE v.removed < (SELECT max(w.removed) FROM link_removals w
                               WHERE w.tenant_id = v.tenant_id)
            RETURNING v.tenant_id
        ), cleared AS (
            UPDATE link_removals w SET units = NULL
            WHERE w.tenant_id IN (SELECT tenant_id FROM dropped) AND w.units IS NOT NULL
              AND w.removed = (SELECT max(x.removed) FROM link_removals x
                               WHERE x.tenant_id = w.tenant_id)
        )
        SELECT count(*) AS n FROM dropped
        """
    ).fetchone()
    return int(row["n"]) if row else 0
