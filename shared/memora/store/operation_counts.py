"""What operators watch of the operations table: operations per status, the active ones per
stage with the oldest's age (Prometheus gauges, `memora status`) and completion lags."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.stages import OperationStatus


def count_by_status(conn: Connection[Any]) -> dict[OperationStatus, int]:
    """Operations per status (a scan of the table: callers cache it)."""
    rows = conn.execute("SELECT status, count(*) AS n FROM operations GROUP BY status").fetchall()
    return {OperationStatus(r["status"]): int(r["n"]) for r in rows}


def active_by_stage(conn: Connection[Any]) -> list[dict[str, Any]]:
    """Active (queued or running) operations per stage (n) with the age of the oldest
    (oldest, seconds), through the partial index on active rows."""
    return conn.execute(
        """
        SELECT COALESCE(stage, 'none') AS stage, count(*) AS n,
               extract(epoch FROM now() - min(created_at))::float8 AS oldest
        FROM operations WHERE status IN ('queued', 'running') GROUP BY 1
        """
    ).fetchall()


def completion_lag(
    conn: Connection[Any], operation_id: UUID | str, within_seconds: float
) -> float | None:
    """Seconds from acceptance to completion, for an operation that completed in the last
    `within_seconds` (None otherwise)."""
    row = conn.execute(
        "SELECT extract(epoch FROM finished_at - created_at)::float8 AS lag "
        "FROM operations WHERE id = %s AND status = 'completed' "
        "AND finished_at > now() - make_interval(secs => %s)",
        (operation_id, within_seconds),
    ).fetchone()
    return float(row["lag"]) if row is not None else None
