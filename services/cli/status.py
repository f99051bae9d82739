"""`memora status`: queue depths (Redis) and operations per state (PostgreSQL), at a glance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from memora.config import Settings
from memora.monitoring import OperationStats, operation_stats, queue_depths

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"


@dataclass
class Status:
    queues: dict[str, int] | None = None
    operations: OperationStats | None = None
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
            "errors": self.errors,
        }


def collect_status(settings: Settings) -> Status:
    import redis

    from memora.db.pool import SYSTEM_ROLE, connect

    status = Status()
    try:
        client = redis.Redis.from_url(
            settings.broker_url or DEFAULT_BROKER, socket_timeout=3, socket_connect_timeout=3
        )
        status.queues = queue_depths(client)
    except Exception as exc:
        status.errors["broker"] = f"{type(exc).__name__}: {exc}"
    try:
        role = SYSTEM_ROLE if settings.row_security else None  # every tenant's operations
        with connect(settings.require_database_url(), role=role) as conn:
            status.operations = operation_stats(conn)
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
    for what, error in status.errors.items():
        console.print(f"[red]{what} unreachable[/]: {error}")
