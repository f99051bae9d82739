"""`memora serve` (the whole stack in the foreground) and `memora migrate` (the schema).

The stack, the logs and the migrations are imported when a command runs (services/cli/main.py).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from memora.basics.config import Settings

if TYPE_CHECKING:
    from services.cli.stack import Stack

console = Console(stderr=True)


def _settings(**overrides: object) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


def serve(
    port: Annotated[int | None, typer.Option(help="HTTP port of the API (env MEMORA_PORT)")] = None,
    query_port: Annotated[int | None, typer.Option(help="port of the query service")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where embedded servers keep data")] = None,
) -> None:
    """Run the whole stack in the foreground; Ctrl-C or SIGTERM stops every process."""
    from memora.basics import logs
    from services.cli.stack import Stack

    settings = _settings(port=port, query_port=query_port, data_dir=data_dir)
    logs.configure(settings.log_format, settings.log_level)
    stack = Stack(settings, log_dir=settings.data_dir / "logs")
    try:
        _run_until_stopped(stack)
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc
    finally:
        console.print("stopping…")
        stack.stop()


def _run_until_stopped(stack: Stack) -> None:
    """Start the stack, say where it listens, and watch it until SIGTERM or Ctrl-C."""
    stopping = False

    def _stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    stack.start()
    stack.wait_ready()
    settings = stack.settings
    console.print(
        f"[green]Memora is ready[/] — API http://{settings.host}:{settings.port} · "
        f"query http://{settings.host}:{settings.query_port} · "
        f"logs {settings.data_dir / 'logs'}"
    )
    while not stopping:
        stack.revive_workers()  # a worker that exits is started again; any other exit stops all
        stack.check_alive()
        time.sleep(0.5)


def migrate() -> None:
    """Apply schema migrations to MEMORA_DATABASE_URL."""
    from memora.db.migrate import upgrade

    settings = Settings()
    upgrade(settings.require_database_url(), settings.embedding_dim)
    console.print("[green]schema is up to date[/]")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(migrate)
