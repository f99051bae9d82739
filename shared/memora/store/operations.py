"""Operations: one row per accepted batch (or think), with per-stage status for operators.

Workers address operations by id (`get_operation`); requests only through `find_operation`,
which shows an operation to the tenant that owns its agent and to no one else.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.pipeline.stages import Stage
from memora.tenancy import Scope

TERMINAL = ("completed", "failed", "superseded")

_FIELDS = [
    "id",
    "agent_id",
    "kind",
    "document_pk",
    "document_id",
    "status",
    "stage",
    "stages",
    "counts",
    "payload",
    "error",
    "created_at",
    "updated_at",
    "finished_at",
]
_COLUMNS = ", ".join(_FIELDS)
_QUALIFIED = ", ".join(f"o.{f}" for f in _FIELDS)


def create_operation(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    *,
    kind: str,
    first_stage: Stage,
    document_pk: UUID | None = None,
    document_id: str | None = None,
    payload: dict[str, Any] | None = None,
    counts: dict[str, int] | None = None,
) -> UUID:
    return create_operation_for_key(
        conn,
        scope.key(agent_id),
        kind=kind,
        first_stage=first_stage,
        document_pk=document_pk,
        document_id=document_id,
        payload=payload,
        counts=counts,
    )


def create_operation_for_key(
    conn: Connection[Any],
    agent_key: str,
    *,
    kind: str,
    first_stage: Stage,
    document_pk: UUID | None = None,
    document_id: str | None = None,
    payload: dict[str, Any] | None = None,
    counts: dict[str, int] | None = None,
) -> UUID:
    """An operation of an agent known by its stored key (jobs, repair)."""
    row = conn.execute(
        """
        INSERT INTO operations (agent_id, kind, document_pk, document_id, stage, payload, counts)
        VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id
        """,
        (
            agent_key,
            kind,
            document_pk,
            document_id,
            first_stage.value,
            Jsonb(payload) if payload is not None else None,
            Jsonb(counts or {}),
        ),
    ).fetchone()
    assert row is not None
    return row["id"]


def get_operation(
    conn: Connection[Any], operation_id: UUID, *, lock: bool = False
) -> dict[str, Any] | None:
    sql = f"SELECT {_COLUMNS} FROM operations WHERE id = %s" + (" FOR UPDATE" if lock else "")
    return conn.execute(sql, (operation_id,)).fetchone()


def find_operation(
    conn: Connection[Any], scope: Scope, operation_id: UUID
) -> dict[str, Any] | None:
    """The operation if its agent belongs to the scope's tenant, with the client's agent id."""
    row = conn.execute(
        f"SELECT {_QUALIFIED} FROM operations o JOIN agents a ON a.agent_id = o.agent_id "
        "WHERE o.id = %s AND a.tenant_id = %s",
        (operation_id, scope.tenant_id),
    ).fetchone()
    if row is not None:
        row["agent_id"] = scope.agent_id(row["agent_id"])
    return row


def stage_started(conn: Connection[Any], operation_id: UUID, stage: Stage) -> None:
    """Record an attempt; committed on its own so operators see work in flight."""
    conn.execute(
        """
        UPDATE operations SET
            status = 'running', stage = %(s)s, updated_at = now(),
            stages = jsonb_set(stages, ARRAY[%(s)s], COALESCE(stages -> %(s)s, '{}'::jsonb)
                || jsonb_build_object(
                    'status', 'running',
                    'attempts', COALESCE((stages -> %(s)s ->> 'attempts')::int, 0) + 1,
                    'started_at', now()))
        WHERE id = %(id)s AND status NOT IN ('completed', 'failed', 'superseded')
        """,
        {"s": stage.value, "id": operation_id},
    )


def stage_done(
    conn: Connection[Any],
    operation_id: UUID,
    stage: Stage,
    next_stage: Stage | None,
    counts: dict[str, int],
) -> None:
    conn.execute(
        """
        UPDATE operations SET
            stage = %(next)s,
            status = CASE WHEN %(next)s::text IS NULL THEN 'completed' ELSE 'running' END,
            finished_at = CASE WHEN %(next)s::text IS NULL THEN now() END,
            counts = counts || %(counts)s,
            updated_at = now(),
            stages = jsonb_set(stages, ARRAY[%(s)s], COALESCE(stages -> %(s)s, '{}'::jsonb)
                || jsonb_build_object('status', 'done', 'finished_at', now(), 'error', NULL))
        WHERE id = %(id)s
        """,
        {
            "next": next_stage.value if next_stage else None,
            "counts": Jsonb(counts),
            "s": stage.value,
            "id": operation_id,
        },
    )


def stage_error(
    conn: Connection[Any], operation_id: UUID, stage: Stage, error: str, *, final: bool
) -> None:
    """A failed attempt (will be retried) or the final failure of the operation."""
    conn.execute(
        """
        UPDATE operations SET
            status = CASE WHEN %(final)s THEN 'failed' ELSE status END,
            error = CASE WHEN %(final)s THEN %(err)s ELSE error END,
            finished_at = CASE WHEN %(final)s THEN now() ELSE finished_at END,
            updated_at = now(),
            stages = jsonb_set(stages, ARRAY[%(s)s], COALESCE(stages -> %(s)s, '{}'::jsonb)
                || jsonb_build_object(
                    'status', CASE WHEN %(final)s THEN 'failed' ELSE 'retrying' END,
                    'error', %(err)s::text))
        WHERE id = %(id)s AND status NOT IN ('completed', 'superseded')
        """,
        {"final": final, "err": error[:2000], "s": stage.value, "id": operation_id},
    )


def mark_superseded(conn: Connection[Any], operation_id: UUID) -> None:
    conn.execute(
        "UPDATE operations SET status = 'superseded', finished_at = now(), updated_at = now() "
        "WHERE id = %s AND status NOT IN ('completed', 'failed')",
        (operation_id,),
    )


def claim_stuck(
    conn: Connection[Any],
    older_than_seconds: float,
    backfill_older_than_seconds: float | None = None,
    limit: int = 500,
) -> list[dict[str, Any]]:
    """Active operations untouched for too long; touched here so one sweep claims each once.
    Backfill operations wait behind the archive's backlog by design, so they get their own,
    longer, threshold (the same one when None); `backfill` says which queues they belong on."""
    return conn.execute(
        """
        UPDATE operations SET updated_at = now()
        WHERE id IN (
            SELECT id FROM operations
            WHERE status IN ('queued', 'running')
              AND updated_at < now() - make_interval(secs => CASE
                  WHEN payload->>'priority' = 'backfill' THEN %(backfill)s ELSE %(live)s END)
            ORDER BY updated_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
        RETURNING id, kind, stage, payload,
                  coalesce(payload->>'priority' = 'backfill', false) AS backfill
        """,
        {
            "live": older_than_seconds,
            "backfill": backfill_older_than_seconds or older_than_seconds,
            "limit": limit,
        },
    ).fetchall()


def count_by_status(conn: Connection[Any]) -> dict[str, int]:
    """Operations per status (a scan of the table: callers cache it)."""
    rows = conn.execute("SELECT status, count(*) AS n FROM operations GROUP BY status").fetchall()
    return {r["status"]: int(r["n"]) for r in rows}


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
    conn: Connection[Any], operation_id: UUID, within_seconds: float
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
