"""Keyword statistics (`memory_terms`, migration 0020_term_counts): how many of an agent's
keyword rows hold each lexeme, kept by triggers on `memory_search` as append-only deltas and
folded by the `term_counts` job. The lexeme '' counts the agent's keyword rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Connection

DOCUMENTS = ""  # the lexeme whose count is the agent's number of keyword rows


def frequencies(conn: Connection[Any], agent_key: str, terms: Sequence[str]) -> dict[str, int]:
    """The document frequency of each of `terms` (0 for a lexeme no row holds) and, under
    DOCUMENTS, the agent's number of keyword rows."""
    wanted = [DOCUMENTS, *terms]
    rows = conn.execute(
        "SELECT lexeme, sum(df) AS df FROM memory_terms "
        "WHERE agent_id = %s AND lexeme = ANY(%s) GROUP BY lexeme",
        (agent_key, wanted),
    ).fetchall()
    found = {r["lexeme"]: max(0, int(r["df"])) for r in rows}
    return {t: found.get(t, 0) for t in wanted}


def agents_with_deltas(conn: Connection[Any], agent_key: str | None) -> list[str]:
    """The agents (all, or the one stored under `agent_key`) with counts not yet folded."""
    rows = conn.execute(
        "SELECT DISTINCT agent_id FROM memory_terms WHERE NOT compacted "
        "AND (%(agent)s::text IS NULL OR agent_id = %(agent)s) ORDER BY agent_id",
        {"agent": agent_key},
    ).fetchall()
    return [r["agent_id"] for r in rows]


def compact(conn: Connection[Any], agent_key: str, limit: int) -> tuple[int, int]:
    """Fold the agent's delta rows of up to `limit` lexemes (those with deltas, in lexeme
    order) into one row each, dropping counts that sum to zero; (rows folded, rows written).

    Deltas that writers commit meanwhile are not in this statement's snapshot: they stay and
    are folded by a later run. A second folder of the same agent waits on the rows this one
    deletes and then finds them gone, so a count is never folded twice; the advisory lock
    only spares it that wait."""
    locked = conn.execute(
        "SELECT pg_try_advisory_xact_lock(74210020, hashtext(%s)) AS locked", (agent_key,)
    ).fetchone()
    if not (locked and locked["locked"]):
        return 0, 0
    row = conn.execute(
        """
        WITH touched AS (
            SELECT DISTINCT lexeme FROM memory_terms
            WHERE agent_id = %(agent)s AND NOT compacted ORDER BY lexeme LIMIT %(limit)s
        ), folded AS (
            DELETE FROM memory_terms t USING touched
            WHERE t.agent_id = %(agent)s AND t.lexeme = touched.lexeme
            RETURNING t.lexeme, t.df
        ), written AS (
            INSERT INTO memory_terms (agent_id, lexeme, df, compacted)
            SELECT %(agent)s, lexeme, sum(df), true FROM folded
            GROUP BY lexeme HAVING sum(df) <> 0
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM folded) AS folded, (SELECT count(*) FROM written) AS written
        """,
        {"agent": agent_key, "limit": limit},
    ).fetchone()
    return (int(row["folded"]), int(row["written"])) if row else (0, 0)
