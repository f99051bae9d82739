"""`memora ops list` and `memora ops retry`: operations, straight in the database
(MEMORA_DATABASE_URL), every tenant's, for operators; a retry goes to the broker
(MEMORA_BROKER_URL) like any other stage work."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Annotated
from uuid import UUID

import typer
from rich.console import Console
from rich.table import Table

from memora.basics.config import Settings
from memora.basics.stages import OperationStatus
from services.cli.context import cli_context

console = Console(stderr=True)
ops_app = typer.Typer(help="Operations: list them, retry a failed one.", no_args_is_help=True)
STATUSES = tuple(s.value for s in OperationStatus)


def _json(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def first_line(text: str | None, width: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


@ops_app.command("list")
def list_ops(
    failed: Annotated[bool, typer.Option("--failed", help="failed operations only")] = False,
    status: Annotated[str | None, typer.Option(help=f"one of {', '.join(STATUSES)}")] = None,
    agent: Annotated[str | None, typer.Option(help="stored agent key (tenant/agent)")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Operations of every tenant, newest first, with their stage and error."""
    from memora.usecases import operations  # the pipeline: not at import (services/cli/main.py)

    if failed and status not in (None, "failed"):
        raise typer.BadParameter("--failed and --status disagree")
    if status is not None and status not in STATUSES:
        raise typer.BadParameter(f"--status must be one of {', '.join(STATUSES)}")
    wanted = OperationStatus.FAILED if failed else OperationStatus(status) if status else None
    with cli_context(Settings(), "cli-ops") as app, app.pool.connection() as conn:
        rows = operations.list_page(app, conn, None, agent_id=agent, status=wanted, limit=limit)
    if json_output:
        print(json.dumps([asdict(op) for op in rows.operations], default=_json))
        return
    table = Table("id", "agent", "kind", "document", "status", "stage", "created", "error")
    for op in rows.operations:
        table.add_row(
            str(op.id),
            op.agent_id,
            op.kind,
            op.document_id or "",
            op.status,
            op.stage or "",
            f"{op.created_at:%Y-%m-%d %H:%M:%S}",
            first_line(op.error),
            style="red" if op.status is OperationStatus.FAILED else None,
        )
    Console(width=200).print(table)
    if not rows.operations:
        console.print("no operations match")


@ops_app.command("retry")
def retry_op(operation_id: Annotated[UUID, typer.Argument(help="the operation's id")]) -> None:
    """Re-run a failed operation from the stage that failed. Idempotent: while it is queued or
    running again, another retry changes nothing."""
    # the pipeline is imported here, not at the top (services/cli/context.py)
    from memora.usecases.operations import retry_operation

    with cli_context(Settings(), "cli-ops") as app, app.pool.connection() as conn:
        outcome = retry_operation(app, conn, None, operation_id)
    messages = {
        "reopened": "[green]re-queued[/] from its failed stage",
        "active": "already queued or running: nothing to do",
        "finished": "[yellow]completed or superseded[/]: nothing to retry",
        "not_found": "[red]not found[/]",
    }
    console.print(f"operation {operation_id}: {messages[outcome]}")
    if outcome in ("finished", "not_found"):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(ops_app, name="ops")
