"""What a backfill run did, and its printing at the end of the command."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


@dataclass
class Summary:
    documents: int = 0
    items: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    skipped_items: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    already_complete: bool = False
    resumed_at: int = 0
    searchable_seconds: float | None = None
    failed_operations: int = 0
    total_documents: int = 0
    failures_log: str | None = None
    # "on"; "disabled" (--max-backlog 0); else why the queue depths could not be read
    backpressure: str = "on"
    retry_after_waits: int = 0  # 429/503 answers whose Retry-After was waited
    retry_after_seconds: float = 0.0

    @property
    def items_per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["items_per_second"] = round(self.items_per_second, 2)
        return data


def print_summary(console: Console, summary: Summary, checkpoint: Path) -> None:
    if summary.already_complete:
        console.print(
            f"[green]already complete[/]: {summary.total_documents} documents were posted "
            f"(checkpoint {checkpoint}; --restart posts everything again, idempotently)"
        )
        return
    table = Table(title="backfill summary", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for row in _rows(summary):
        table.add_row(*row)
    console.print(table)
    if summary.backpressure.startswith("off"):
        console.print(f"[bold yellow]warning[/]: backpressure was {summary.backpressure}")
    if summary.interrupted:
        console.print(f"[yellow]interrupted[/]: run the same command to resume ({checkpoint})")


def _rows(summary: Summary) -> list[tuple[str, str]]:
    """The summary table's rows: what, value."""
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())) or "-"
    rows: list[tuple[str, str]] = [
        ("documents posted", f"{summary.documents:,}"),
        ("items (messages)", f"{summary.items:,}"),
        ("outcomes", outcomes),
        ("failed documents", f"{summary.failed:,}"),
        ("skipped messages", f"{summary.skipped_items:,}"),
        ("elapsed", f"{summary.seconds:,.1f} s"),
        ("throughput", f"{summary.items_per_second:,.1f} items/s"),
        ("backpressure", summary.backpressure),
    ]
    if summary.retry_after_waits:
        rows.append(
            (
                "Retry-After honoured",
                f"{summary.retry_after_waits:,} × ({summary.retry_after_seconds:,.0f} s)",
            )
        )
    if summary.resumed_at:
        rows.append(("resumed after", f"{summary.resumed_at:,} documents"))
    if summary.searchable_seconds is not None:
        rows.append(("searchable after", f"{summary.searchable_seconds:,.1f} s more"))
        rows.append(("failed operations", f"{summary.failed_operations:,}"))
    if summary.failures_log:
        rows.append(("failures log", summary.failures_log))
    return rows
