"""`memora status`: queue depths (Redis) and operations per state (PostgreSQL), at a glance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis
from rich.console import Console
from rich.table import Table

from memora.config import Settings
from memora.db.pool import connect_system
from memora.monitoring import OperationStats, operation_stats, queue_depths
from memora.store import operations
from services.cli.operations import first_line

FAILED_SHOWN = 10


@dataclass
class Status:
    queues: dict[str, int] | None = None
    operations: OperationStats | None = None
    failed: list[dict[str, Any]] = field(default_factory=list)  # the latest failed operations
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
                {k: str(v) if v is not None else None for k, v in row.items()}
                for row in self.failed
            ],
            "errors": self.errors,
        }


def collect_status(settings: Settings) -> Status:
    status = Status()
    try:
        client = redis.Redis.from_url(settings.broker, socket_timeout=3, socket_connect_timeout=3)
        status.queues = queue_depths(client)
    except Exception as exc:
        status.errors["broker"] = f"{type(exc).__name__}: {exc}"
    try:
        with connect_system(settings) as conn:  # every tenant's operations
            status.operations = operation_stats(conn)
            if status.operations.by_status.get("failed"):
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
    ops = status.operations
    if ops is not None:
        table = Table(title="operations")
        table.add_column("status")
        table.add_column("count", justify="right")
        for name in ("queued", "running", "completed", "failed", "superseded"):
            style = "red" if name == "failed" and ops.by_status.get(name) else None
            table.add_row(name, f"{ops.by_status.get(name, 0):,}", style=style)
        console.print(table)
        if ops.active_by_stage:
            active = ", ".join(f"{k} {v:,}" for k, v in sorted(ops.active_by_stage.items()))
            console.print(
                f"in flight by stage: {active}; oldest {ops.oldest_active_seconds:,.0f}s old"
            )
        else:
            console.print("nothing in flight")
    if status.failed:
        table = Table(title=f"failed operations (latest {FAILED_SHOWN}; `memora ops retry ID`)")
        for column in ("id", "agent", "stage", "failed at", "error"):
            table.add_column(column)
        for row in status.failed:
            failed_at = row["finished_at"]
            table.add_row(
                str(row["id"]),
                row["agent_id"],
                row["stage"] or "",
                f"{failed_at:%Y-%m-%d %H:%M:%S}" if failed_at else "",
                first_line(row["error"], 80),
                style="red",
            )
        console.print(table)
    for what, error in status.errors.items():
        console.print(f"[red]{what} unreachable[/]: {error}")
