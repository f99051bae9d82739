"""Coalesced appends (issue 60): an append's messages join the conversation's pending append
operation, under the row lock that starting its extract takes (`operations.stage_started`).

An operation made while the conversation's previous one is still before its embedding is held
after it (`payload.after`, `payload.hold = 'waiting'`): the previous one's embed releases it
(`release`: its extract is sent at once), or its delayed extract claims it when the bound passes
first (`claim`). Exactly one of the two moves `hold` on, so one extract runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.stages import Stage

# The stage of an operation whose end releases the operation held after it: by then the
# previous messages are embedded (semantic search finds them), and the held extract overlaps
# with the cheap stages that follow.
RELEASED_BY = Stage.EMBED


def join(
    conn: Connection[Any], operation_id: UUID, new: int, *, backfill: bool, max_items: int
) -> bool:
    """Add `new` messages to an append operation that has not started (coalescing): only while
    its extract has not begun, at the same priority, up to `max_items` messages. The row lock
    this UPDATE takes is the one `stage_started` needs, so a join either commits before the
    extract starts (which then reads the joined messages) or finds it started."""
    row = conn.execute(
        """
        UPDATE operations SET updated_at = now(),
            counts = jsonb_set(counts, '{items}', to_jsonb((counts ->> 'items')::int + %(n)s))
        WHERE id = %(id)s AND kind = 'append' AND status = 'queued' AND stages = '{}'::jsonb
          AND (coalesce(payload ->> 'priority', 'live') = 'backfill') = %(backfill)s
          AND (counts ->> 'items')::int + %(n)s <= %(max)s
        RETURNING id
        """,
        {"id": operation_id, "n": new, "backfill": backfill, "max": max_items},
    ).fetchone()
    return row is not None


@dataclass(frozen=True)
class Previous:
    """The conversation's previous operation as an append that makes a new one sees it."""

    behind: bool  # queued or running and not past `RELEASED_BY`: hold the new one after it
    recent: bool  # the conversation was written within the window: a burst, worth a hold


def previous(conn: Connection[Any], operation_id: UUID, window_s: float) -> Previous:
    """The previous operation's state, and whether its conversation's last write (an append
    or a post) came less than `window_s` ago."""
    row = conn.execute(
        """
        SELECT o.status IN ('queued', 'running')
               AND coalesce(o.stages #>> %(stage)s, '') <> 'done' AS behind,
               d.updated_at > now() - make_interval(secs => %(w)s) AS recent
        FROM operations o JOIN documents d ON d.id = o.document_pk WHERE o.id = %(id)s
        """,
        {"stage": [RELEASED_BY.value, "status"], "w": window_s, "id": operation_id},
    ).fetchone()
    return Previous(bool(row and row["behind"]), bool(row and row["recent"]))


def held_after(operation_id: UUID) -> dict[str, str]:
    """The payload keys of an operation held after `operation_id`."""
    return {"after": str(operation_id), "hold": "waiting"}


def release(conn: Connection[Any], operation_id: UUID) -> list[tuple[UUID, bool]]:
    """The operations held after this one that have not started, now released (their extract
    is the caller's to send, after its commit): id and whether it is a backfill."""
    rows = conn.execute(
        """
        UPDATE operations SET payload = payload || '{"hold": "released"}'::jsonb
        WHERE payload ->> 'after' = %s AND payload ->> 'hold' = 'waiting'
          AND status = 'queued' AND stages = '{}'::jsonb
        RETURNING id, coalesce(payload ->> 'priority', 'live') = 'backfill' AS backfill
        """,
        (str(operation_id),),
    ).fetchall()
    return [(row["id"], row["backfill"]) for row in rows]


def claim(conn: Connection[Any], operation_id: UUID) -> bool:
    """For the delayed extract of a held operation: False when it was released (the extract
    sent then runs it), else True, now and on a redelivery of this extract."""
    row = conn.execute(
        """
        UPDATE operations SET payload = payload || '{"hold": "timer"}'::jsonb
        WHERE id = %s AND coalesce(payload ->> 'hold', 'timer') IN ('waiting', 'timer')
        RETURNING id
        """,
        (operation_id,),
    ).fetchone()
    return row is not None
