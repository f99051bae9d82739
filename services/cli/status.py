"""`memora status`: queue depths (Redis) and operations per state (PostgreSQL), at a glance.

Redis, the pool and the store are imported when the command runs (services/cli/main.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from memora.basics.config import Settings
from memora.basics.stages import OperationStatus
from services.cli.operations import first_line

if TYPE_CHECKING:
    from memora.pipeline.monitoring import OperationStats
    from memora.store.operations import Operation

FAILED_SHOWN = 10
FAILED_FIELDS = ("id", "agent_id", "kind", "document_id", "stage", "error", "finished_at")


@dataclass
class Status:
    queues: dict[str, int] | None = None
    operations: OperationStats | None = None
    failed: list[Operation] = field(default_factory=list)  # the latest failed operations
    errors: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        ops = self.operations
        return {
            "queues": self.queues,
            "operations": None
            if ops is None
            else {
                "by_status": ops.by_status,
                "active_by_stage": ops.active_by_stage,
                "oldest_active_seconds": round(ops.oldest_active_seconds, 1),
            },
            "failed": [
                {
                    k: str(getattr(op, k)) if getattr(op, k) is not None else None
                    for k in FAILED_FIELDS
                }
                for op in self.failed
            ],
            "errors": self.errors,
        }


def status(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Queue depths and operations per state (MEMORA_BROKER_URL, MEMORA_DATABASE_URL)."""
    result = collect_status(Settings())
    if json_output:
        print(json.dumps(result.as_dict()))
    else:
        print_status(Console(), result)
    if len(result.errors) == 2:
        raise typer.Exit(1)


def collect_status(settings: Settings) -> Status:
    import redis

    from memora.db.pool import connect_system
    from memora.pipeline.monitoring import operation_stats, queue_depths
    from memora.store import operations

    status = Status()
    try:
        client = redis.Redis.from_url(settings.broker, socket_timeout=3, socket_connect_timeout=3)
        status.queues = queue_depths(client)
    except Exception as exc:
        status.errors["broker"] = f"{type(exc).__name__}: {exc}"
    try:
        with connect_system(settings) as conn:  # every tenant's operations
            status.operations = operation_stats(conn)
            if status.operations.by_status.get(OperationStatus.FAILED):
                status.failed = operations.recent_failed(conn, FAILED_SHOWN)
    except Exception as exc:
        status.errors["database"] = f"{type(exc).__name__}: {exc}"
    return status


def print_status(console: Console, status: Status) -> None:
    if status.queues is not None:
        table = Table(title="queues (messages waiting)")
        table.add_column("queue")
        table.add_column("depth", justify="right")
        for queue, depth in status.queues.items():
            table.add_row(queue, f"{depth:,}", style="bold" if depth else None)
        console.print(table)
    if status.operations is not None:
        _print_operations(console, status.operations)
    if status.failed:
        _print_failed(console, status.failed)
    for what, error in status.errors.items():
        console.print(f"[red]{what} unreachable[/]: {error}")


def _print_operations(console: Console, ops: OperationStats) -> None:
    table = Table(title="operations")
    table.add_column("status")
    table.add_column("count", justify="right")
    for name in OperationStatus:
        style = "red" if name is OperationStatus.FAILED and ops.by_status.get(name) else None
        table.add_row(name.value, f"{ops.by_status.get(name, 0):,}", style=style)
    console.print(table)
    if ops.active_by_stage:
        active = ", ".join(f"{k} {v:,}" for k, v in sorted(ops.active_by_stage.items()))
        console.print(f"in flight by stage: {active}; oldest {ops.oldest_active_seconds:,.0f}s old")
    else:
        console.print("nothing in flight")


def _print_failed(console: Console, failed: list[Operation]) -> None:
    table = Table(title=f"failed operations (latest {FAILED_SHOWN}; `memora ops retry ID`)")
    for column in ("id", "agent", "stage", "failed at", "error"):
        table.add_column(column)
    for op in failed:
        failed_at = op.finished_at
        table.add_row(
            str(op.id),
            op.agent_id,
            op.stage or "",
            f"{failed_at:%Y-%m-%d %H:%M:%S}" if failed_at else "",
            first_line(op.error, 80),
            style="red",
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(status)
