"""The `memora` command."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console

from memora.basics import logs
from memora.basics.config import Settings
from services.cli import db, jobs, operations, ops, simulation, tenants
from services.cli.backfill import command as backfill
from services.cli.stack import Stack

app = typer.Typer(help="Memora: long-term memory for conversational agents.", no_args_is_help=True)
console = Console(stderr=True)
backfill.register(app)  # backfill PATH (services/cli/backfill/)
ops.register(app)  # status, worker, worker-ready (services/cli/ops.py)
tenants.register(app)  # tenants create|list|delete, keys create|list|revoke
jobs.register(app)  # jobs list|run (periodic jobs, run once now)
app.add_typer(operations.ops_app, name="ops")  # ops list|retry
db.register(app)  # db wait
simulation.register(app)  # seed FILE, mcp --agent ID


def _settings(**overrides: object) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


@app.command()
def serve(
    port: Annotated[int | None, typer.Option(help="HTTP port of the API (env MEMORA_PORT)")] = None,
    query_port: Annotated[int | None, typer.Option(help="port of the query service")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where embedded servers keep data")] = None,
) -> None:
    """Run the whole stack in the foreground; Ctrl-C or SIGTERM stops every process."""
    settings = _settings(port=port, query_port=query_port, data_dir=data_dir)
    logs.configure(settings.log_format, settings.log_level)
    stack = Stack(settings, log_dir=settings.data_dir / "logs")
    stopping = False

    def _stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        stack.start()
        stack.wait_ready()
        console.print(
            f"[green]Memora is ready[/] — API http://{settings.host}:{settings.port} · "
            f"query http://{settings.host}:{settings.query_port} · "
            f"logs {settings.data_dir / 'logs'}"
        )
        while not stopping:
            stack.check_alive()
            time.sleep(0.5)
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc
    finally:
        console.print("stopping…")
        stack.stop()


@app.command()
def migrate() -> None:
    """Apply schema migrations to MEMORA_DATABASE_URL."""
    from memora.db.migrate import upgrade

    settings = Settings()
    upgrade(settings.require_database_url(), settings.embedding_dim)
    console.print("[green]schema is up to date[/]")


@app.command()
def demo(
    archive: Annotated[
        Path | None, typer.Option(help="JSONL archive (default: the bundled sample)")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where embedded servers keep data")] = None,
) -> None:
    """Start the stack, ingest a sample conversation archive through the API, and query it."""
    from services.cli.demo import run_demo

    sys.exit(run_demo(archive, data_dir))


if __name__ == "__main__":
    app()
