"""The `memora backfill` command: its options, declared once, and the command that reads them.

Light to import: the run (httpx, tenacity, prometheus-client's parser) is imported when the
command runs (services/cli/main.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True)

Archive = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="the archive")]
Api = Annotated[
    str | None,
    typer.Option(
        help="write API base URL (env MEMORA_API_URL; default http://MEMORA_HOST:MEMORA_PORT)"
    ),
]
FormatName = Annotated[
    str, typer.Option("--format", help="auto, jsonl (messages or conversations) or locomo")
]
Agent = Annotated[
    str | None, typer.Option(help="store everything for this agent (default: the archive's)")
]
CheckpointFile = Annotated[
    Path | None,
    typer.Option(
        help="checkpoint file (default: MEMORA_DATA_DIR/backfill/, one per API URL, API key "
        "and archive content)"
    ),
]
Concurrency = Annotated[int, typer.Option(min=1, max=64, help="requests in flight")]
MaxItems = Annotated[
    int, typer.Option(min=1, max=1000, help="messages per document (longer ones are split)")
]
MaxBacklog = Annotated[
    int, typer.Option(min=0, help="pause while the backfill queues hold more (0: never)")
]
Priority = Annotated[str, typer.Option(help="backfill (low-priority queues) or live")]
UpdateMode = Annotated[
    str,
    typer.Option(
        help="replace (each document posted whole) or append (messages appended to their "
        "conversation; only new ones are stored)"
    ),
]
Restart = Annotated[bool, typer.Option(help="ignore the checkpoint; post everything")]
Wait = Annotated[bool, typer.Option(help="then wait until everything is searchable")]
DryRun = Annotated[bool, typer.Option(help="only read and count; post nothing")]
ShowProgress = Annotated[bool, typer.Option(help="show the progress bar")]
JsonSummary = Annotated[
    bool, typer.Option("--json", help="also print the summary as JSON on stdout")
]
ApiKey = Annotated[
    str | None, typer.Option(help="API key, when the API requires one (env MEMORA_API_KEY)")
]


def backfill(
    path: Archive,
    api: Api = None,
    fmt: FormatName = "auto",
    agent: Agent = None,
    checkpoint: CheckpointFile = None,
    concurrency: Concurrency = 4,
    max_items: MaxItems = 500,
    max_backlog: MaxBacklog = 500,
    priority: Priority = "backfill",
    update_mode: UpdateMode = "replace",
    restart: Restart = False,
    wait: Wait = False,
    dry_run: DryRun = False,
    progress: ShowProgress = True,
    json_summary: JsonSummary = False,
    api_key: ApiKey = None,
) -> None:
    """Stream a conversation archive into Memora on the backfill queues; resumable, idempotent."""
    from services.cli.backfill.options import from_command_line
    from services.cli.backfill.run import run_command

    options = from_command_line(
        path, api=api, fmt=fmt, checkpoint=checkpoint, priority=priority, api_key=api_key,
        agent=agent, update_mode=update_mode, concurrency=concurrency, max_items=max_items,
        max_backlog=max_backlog, restart=restart, wait=wait, dry_run=dry_run, progress=progress,
    )  # fmt: skip
    exit_code = run_command(options, console, json_summary)
    if exit_code:
        raise typer.Exit(exit_code)


def register(app: typer.Typer) -> None:
    app.command()(backfill)
