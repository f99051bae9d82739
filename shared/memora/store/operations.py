"""Operations: one row per accepted batch (or think), with per-stage status for operators.

Workers address operations by id (`get_operation`); requests only through `find_operation`,
which shows an operation to the tenant that owns its agent and to no one else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.basics.stages import OperationKind, OperationStatus, Stage, StageStatus
from memora.basics.tenancy import Scope
from memora.store.rows import fetch_all


@dataclass(frozen=True)
class StageRecord:
    """One stage of an operation, as `operations.stages` (jsonb) records it."""

    status: StageStatus
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    retries: int = 0  # times it was retried after failing
    last_error: str | None = None  # the error before the last retry

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> StageRecord:
        def moment(key: str) -> datetime | None:
            raw = value.get(key)
            return datetime.fromisoformat(raw) if raw else None

        return cls(
            status=StageStatus(value["status"]),
            attempts=int(value.get("attempts") or 0),
            started_at=moment("started_at"),
            finished_at=moment("finished_at"),
            error=value.get("error"),
            retries=int(value.get("retries") or 0),
            last_error=value.get("last_error"),
        )


@dataclass
class Operation:
    """One row of `operations`: an accepted batch, an edit, a repair, a think's opinions..."""

    id: UUID
    agent_id: str  # the stored agent key; the client's id in rows read through a Scope
    kind: OperationKind
    document_pk: UUID | None
    document_id: str | None
    status: OperationStatus
    stage: Stage | None
    stages: dict[Stage, StageRecord]
    counts: dict[str, int]
    payload: dict[str, Any]
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None

    def __post_init__(self) -> None:  # columns as psycopg reads them, typed once here
        self.kind = OperationKind(self.kind)
        self.status = OperationStatus(self.status)
        self.stage = Stage(self.stage) if self.stage else None
        self.stages = {
            Stage(name): r if isinstance(r, StageRecord) else StageRecord.from_json(r)
            for name, r in (self.stages or {}).items()
        }
        self.payload = self.payload or {}
        self.counts = self.counts or {}

    def is_done(self, stage: Stage) -> bool:
        record = self.stages.get(stage)
        return record is not None and record.status is StageStatus.DONE

    @property
    def backfill(self) -> bool:
        """Accepted with `X-Memora-Priority: backfill`: its stages run on the backfill queues."""
        return bool(self.payload.get("priority") == "backfill")


@dataclass(frozen=True)
class StuckOperation:
    """An active operation the reconciler claimed, with the queues it belongs on."""

    id: UUID
    kind: OperationKind
    stage: Stage | None
    backfill: bool = field(default=False)


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
    kind: OperationKind,
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
    kind: OperationKind,
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


def _as_client(rows: list[Operation], scope: Scope | None) -> list[Operation]:
    if scope is not None:
        for row in rows:
            row.agent_id = scope.agent_id(row.agent_id)
    return rows


def get_operation(
    conn: Connection[Any], operation_id: UUID, *, lock: bool = False
) -> Operation | None:
    sql = f"SELECT {_COLUMNS} FROM operations WHERE id = %s" + (" FOR UPDATE" if lock else "")
    rows = fetch_all(conn, Operation, sql, (operation_id,))
    return rows[0] if rows else None


def get_operations(conn: Connection[Any], operation_ids: list[UUID]) -> dict[UUID, Operation]:
    """`get_operation` of several, by id (those that exist)."""
    sql = f"SELECT {_COLUMNS} FROM operations WHERE id = ANY(%s)"
    return {op.id: op for op in fetch_all(conn, Operation, sql, (operation_ids,))}


def find_operation(conn: Connection[Any], scope: Scope, operation_id: UUID) -> Operation | None:
    """The operation if its agent belongs to the scope's tenant, with the client's agent id."""
    rows = fetch_all(
        conn,
        Operation,
        f"SELECT {_QUALIFIED} FROM operations o JOIN agents a ON a.agent_id = o.agent_id "
        "WHERE o.id = %s AND a.tenant_id = %s",
        (operation_id, scope.tenant_id),
    )
    return _as_client(rows, scope)[0] if rows else None


def stage_started(conn: Connection[Any], operation_id: UUID, stage: Stage) -> None:
    """Record an attempt; committed on its own so operators see work in flight."""
    stages_started(conn, [operation_id], stage)


def stages_started(conn: Connection[Any], operation_ids: list[UUID], stage: Stage) -> None:
    """`stage_started` of several operations in one statement (their rows locked in id order,
    so that two batches holding some of the same operations cannot deadlock)."""
    conn.execute(
        """
        WITH locked AS (
            SELECT id FROM operations WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE
        )
        UPDATE operations o SET
            status = 'running', stage = %(s)s, updated_at = now(),
            stages = jsonb_set(o.stages, ARRAY[%(s)s], COALESCE(o.stages -> %(s)s, '{}'::jsonb)
                || jsonb_build_object(
                    'status', 'running',
                    'attempts', COALESCE((o.stages -> %(s)s ->> 'attempts')::int, 0) + 1,
                    'started_at', now()))
        FROM locked
        WHERE o.id = locked.id AND o.status NOT IN ('completed', 'failed', 'superseded')
        """,
        {"s": stage.value, "ids": operation_ids},
    )


def stage_done(
    conn: Connection[Any],
    operation_id: UUID,
    stage: Stage,
    next_stage: Stage | None,
    counts: dict[str, int],
) -> Operation | None:
    """The stage marked done; when no stage follows, the operation completed, and its row
    after (for its webhook event) is returned."""
    sql = """
        UPDATE operations SET
            stage = %(next)s,
            status = CASE WHEN %(next)s::text IS NULL THEN 'completed' ELSE 'running' END,
            finished_at = CASE WHEN %(next)s::text IS NULL THEN now() END,
            counts = counts || %(counts)s,
            updated_at = now(),
            stages = jsonb_set(stages, ARRAY[%(s)s], COALESCE(stages -> %(s)s, '{}'::jsonb)
                || jsonb_build_object('status', 'done', 'finished_at', now(), 'error', NULL))
        WHERE id = %(id)s
    """
    params = {
        "next": next_stage.value if next_stage else None,
        "counts": Jsonb(counts),
        "s": stage.value,
        "id": operation_id,
    }
    if next_stage is not None:
        conn.execute(sql, params)
        return None
    rows = fetch_all(conn, Operation, f"{sql} RETURNING {_COLUMNS}", params)
    return rows[0] if rows else None


def stage_error(
    conn: Connection[Any], operation_id: UUID, stage: Stage, error: str, *, final: bool
) -> bool:
    """A failed attempt (will be retried) or the final failure of the operation; whether it
    was recorded (not for an operation that completed or was superseded, nor for a stage that
    is done: a task that failed after its stage committed, sending the next, leaves the
    operation to its retry or to the reconciler)."""
    recorded = conn.execute(
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
          AND (stages -> %(s)s ->> 'status') IS DISTINCT FROM 'done'
        """,
        {"final": final, "err": error[:2000], "s": stage.value, "id": operation_id},
    )
    return recorded.rowcount > 0


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
) -> list[StuckOperation]:
    """Active operations untouched for too long; touched here so one sweep claims each once.
    Backfill operations wait behind the archive's backlog by design, so they get their own,
    longer, threshold (the same one when None); `backfill` says which queues they belong on."""
    rows = conn.execute(
        """
        UPDATE operations SET updated_at = now()
        WHERE id IN (
            SELECT id FROM operations
            WHERE status IN ('queued', 'running')
              AND updated_at < now() - make_interval(secs => CASE
                  WHEN payload->>'priority' = 'backfill' THEN %(backfill)s ELSE %(live)s END)
            ORDER BY updated_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
        RETURNING id, kind, stage, coalesce(payload->>'priority' = 'backfill', false) AS backfill
        """,
        {
            "live": older_than_seconds,
            "backfill": backfill_older_than_seconds or older_than_seconds,
            "limit": limit,
        },
    ).fetchall()
    return [
        StuckOperation(
            r["id"],
            OperationKind(r["kind"]),
            Stage(r["stage"]) if r["stage"] else None,
            backfill=r["backfill"],
        )
        for r in rows
    ]


def list_operations(
    conn: Connection[Any],
    scope: Scope | None,
    *,
    agent_id: str | None = None,
    status: OperationStatus | None = None,
    limit: int = 50,
    before: tuple[Any, UUID] | None = None,
) -> list[Operation]:
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
    rows = fetch_all(
        conn,
        Operation,
        f"SELECT {_QUALIFIED} FROM operations o {join} "
        f"{'WHERE ' + ' AND '.join(where) if where else ''} "
        "ORDER BY o.created_at DESC, o.id DESC LIMIT %(limit)s",
        params,
    )
    return _as_client(rows, scope)


ReopenOutcome = Literal["reopened", "active", "finished", "not_found"]


def reopen_failed(
    conn: Connection[Any], scope: Scope | None, operation_id: UUID
) -> tuple[ReopenOutcome, Operation | None]:
    """Put a failed operation back in the queue at the stage that failed (its `stage`), and
    say what happened: "reopened" (the caller enqueues it), "active" (queued or running
    already: a retry under way, nothing to do), "finished" (completed or superseded), or
    "not_found" (no such operation in the scope). Call it in a transaction."""
    found = fetch_all(
        conn,
        Operation,
        f"SELECT {_QUALIFIED} FROM operations o JOIN agents a ON a.agent_id = o.agent_id "
        "WHERE o.id = %(id)s AND (%(tenant)s::text IS NULL OR a.tenant_id = %(tenant)s) "
        "FOR UPDATE OF o",
        {"id": operation_id, "tenant": scope.tenant_id if scope is not None else None},
    )
    if not found:
        return "not_found", None
    by_status: dict[OperationStatus, ReopenOutcome] = {
        OperationStatus.FAILED: "reopened",
        OperationStatus.QUEUED: "active",
        OperationStatus.RUNNING: "active",
    }
    outcome = by_status.get(found[0].status, "finished")
    if outcome == "reopened":
        found = fetch_all(
            conn,
            Operation,
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
        )
    return outcome, _as_client(found, scope)[0]


def recent_failed(conn: Connection[Any], limit: int = 10) -> list[Operation]:
    """The latest failed operations of every tenant, for `memora status`."""
    return fetch_all(
        conn,
        Operation,
        f"SELECT {_COLUMNS} FROM operations WHERE status = 'failed' "
        "ORDER BY finished_at DESC NULLS LAST, id LIMIT %s",
        (limit,),
    )
