"""Coalesced appends (issue 60): an append's messages join the conversation's pending append
operation, under the row lock that starting its extract takes (`operations.stage_started`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import Connection


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


def is_active(conn: Connection[Any], operation_id: UUID) -> bool:
    """Whether the operation is queued or running."""
    row = conn.execute(
        "SELECT status IN ('queued', 'running') AS active FROM operations WHERE id = %s",
        (operation_id,),
    ).fetchone()
    return bool(row and row["active"])
