"""The agents' vector removals (`vector_removals`, migration 0024_vector_changes): one row per
agent a statement took a searchable vector away from, or changed a filter column of, with its
transaction's id. Since 0027_removed_units each row also names its units (a holder takes those
in place; NULL: read it whole again). A reader needs only the latest of each agent, so the
older ones are dropped, and the latest's units cleared: they no longer stand for the rows
dropped."""

from __future__ import annotations

from typing import Any

from psycopg import Connection, sql


def compact(conn: Connection[Any], agent_key: str | None) -> int:
    """Keep only the latest removal of each agent (all, or the one stored under
    `agent_key`), without its units; the rows dropped."""
    return _keep_latest(conn, "vector_removals", "agent_id", agent_key)


def _keep_latest(conn: Connection[Any], table: str, key: str, only: str | None) -> int:
    """Drop every row of `table` but the latest of each `key` (of all, or of the one equal to
    `only`), and clear the units of the latest where rows were dropped."""
    row = conn.execute(
        sql.SQL(
            """
            WITH dropped AS (
                DELETE FROM {table} v
                WHERE (%(only)s::text IS NULL OR v.{key} = %(only)s)
                  AND v.removed < (SELECT max(w.removed) FROM {table} w WHERE w.{key} = v.{key})
                RETURNING v.{key} AS k
            ), cleared AS (
                UPDATE {table} w SET units = NULL
                WHERE w.{key} IN (SELECT k FROM dropped) AND w.units IS NOT NULL
                  AND w.removed = (SELECT max(x.removed) FROM {table} x WHERE x.{key} = w.{key})
            )
            SELECT count(*) AS n FROM dropped
            """
        ).format(table=sql.Identifier(table), key=sql.Identifier(key)),
        {"only": only},
    ).fetchone()
    return int(row["n"]) if row else 0
