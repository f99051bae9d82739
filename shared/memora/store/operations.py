"""Operations: one row per accepted batch (or think), with per-stage status for operators.

Workers address operations by id (`get_operation`); requests only through `find_operation`,
which shows an operation to the tenant that owns its agent and to no one else.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.queues import Stage
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
    operation_id: UUID = row["id"]
    return operation_id


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


def list_operations(
    conn: Connection[Any],
    scope: Scope | None,
    *,
    agent_id: str | None = None,
    status: str | None = None,
    limit: int = 50,
    before: tuple[Any, UUID] | None = None,
) -> list[dict[str, Any]]:
    """Operations newest first, after the keyset `before` = (created_at, id) of the last one
    seen. `scope`: the caller's tenant (agent ids as its client names them); None: every
    tenant, for operators (`memora ops list`), with stored agent keys."""
    where: list[str] = []
    params: dict[str, Any] = {"limit": limit}
    if scope is not None:
        where.append("a.tenant_id = %(tenant)s")
        params["tenant"] = scope.tenant_id
    if agent_id is not None:
        where.append("o.agent_id = %(agent)s")
        params["agent"] = scope.key(agent_id) if scope is not None else agent_id
    if status is not None:
        where.append("o.status = %(status)s")
        params["status"] = status
    if before is not None:
        where.append("(o.created_at, o.id) < (%(before_at)s, %(before_id)s)")
        params |= {"before_at": before[0], "before_id": before[1]}
    join = "JOIN agents a ON a.agent_id = o.agent_id" if scope is not None else ""
    rows = conn.execute(
        f"SELECT {_QUALIFIED} FROM operations o {join} "
        f"{'WHERE ' + ' AND '.join(where) if where else ''} "
        "ORDER BY o.created_at DESC, o.id DESC LIMIT %(limit)s",
        params,
    ).fetchall()
    if scope is not None:
        for row in rows:
            row["agent_id"] = scope.agent_id(row["agent_id"])
    return rows


ReopenOutcome = Literal["reopened", "active", "finished", "not_found"]


def reopen_failed(
    conn: Connection[Any], scope: Scope | None, operation_id: UUID
) -> tuple[ReopenOutcome, dict[str, Any] | None]:
    """Put a failed operation back in the queue at the stage that failed (its `stage`), and
    say what happened: "reopened" (the caller enqueues it), "active" (queued or running
    already: a retry under way, nothing to do), "finished" (completed or superseded), or
    "not_found" (no such operation in the scope). Call it in a transaction."""
    row = conn.execute(
        f"SELECT {_QUALIFIED} FROM operations o JOIN agents a ON a.agent_id = o.agent_id "
        "WHERE o.id = %(id)s AND (%(tenant)s::text IS NULL OR a.tenant_id = %(tenant)s) "
        "FOR UPDATE OF o",
        {"id": operation_id, "tenant": scope.tenant_id if scope is not None else None},
    ).fetchone()
    if row is None:
        return "not_found", None
    by_status: dict[str, ReopenOutcome] = {
        "failed": "reopened",
        "queued": "active",
        "running": "active",
    }
    outcome = by_status.get(row["status"], "finished")
    if outcome == "reopened":
        row = conn.execute(
            f"""
            UPDATE operations SET
                status = 'queued', error = NULL, finished_at = NULL, updated_at = now(),
                stages = CASE WHEN stage IS NULL THEN stages ELSE jsonb_set(stages, ARRAY[stage],
                    COALESCE(stages -> stage, '{{}}'::jsonb) || jsonb_build_object(
                        'status', 'queued',
                        'retries', COALESCE((stages -> stage ->> 'retries')::int, 0) + 1,
                        'last_error', stages -> stage -> 'error',
                        'error', NULL)) END
            WHERE id = %s RETURNING {_COLUMNS}
            """,
            (operation_id,),
        ).fetchone()
    if row is not None and scope is not None:
        row["agent_id"] = scope.agent_id(row["agent_id"])
    return outcome, row


def recent_failed(conn: Connection[Any], limit: int = 10) -> list[dict[str, Any]]:
    """The latest failed operations of every tenant, for `memora status`."""
    return conn.execute(
        "SELECT id, agent_id, kind, document_id, stage, error, finished_at FROM operations "
        "WHERE status = 'failed' ORDER BY finished_at DESC NULLS LAST, id LIMIT %s",
        (limit,),
    ).fetchall()
