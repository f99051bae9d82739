"""`memora serve` (the whole stack in the foreground) and `memora migrate` (the schema).

The stack, the logs and the migrations are imported when a command runs (services/cli/main.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from memora.basics.config import Settings

if TYPE_CHECKING:
    from services.cli.stack import Stack

console = Console(stderr=True, soft_wrap=True)  # a line stays one line in a log file


def _settings(**overrides: object) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


ReadReplicas = Annotated[
    int | None,
    typer.Option(help="1: a streaming standby the query service reads (MEMORA_READ_REPLICAS)"),
]


def serve(
    port: Annotated[int | None, typer.Option(help="HTTP port of the API (env MEMORA_PORT)")] = None,
    query_port: Annotated[int | None, typer.Option(help="port of the query service")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where embedded servers keep data")] = None,
    read_replicas: ReadReplicas = None,
) -> None:
    """Run the whole stack in the foreground; Ctrl-C or SIGTERM stops every process, at any
    moment (a second one kills them at once)."""
    from memora.basics import logs
    from services.cli.stack import Cancelled, Stack

    settings = _settings(
        port=port, query_port=query_port, data_dir=data_dir, read_replicas=read_replicas
    )
    logs.configure(settings.log_format, settings.log_level)
    if taken := _claim_ports(settings):
        console.print(f"[red]{taken}[/]")
        raise typer.Exit(1)
    started = time.monotonic()
    stack = Stack(
        settings,
        log_dir=settings.data_dir / "logs",
        progress=lambda what: console.print(f"  {time.monotonic() - started:5.1f} s  {what}"),
    )
    ready = _handle_signals(stack)
    try:
        _run_until_stopped(stack, started, ready)
    except Cancelled:
        pass
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc
    finally:
        if stack.processes or stack.postgres or stack.redis:
            console.print("stopping…")
        if ready.is_set():
            stack.stop()
        else:  # nothing was taken yet that a graceful stop would finish
            stack.abort()


def _claim_ports(settings: Settings) -> str | None:
    """The API's and the query service's ports, checked before anything starts: a derived
    query port that is taken is replaced by a free one (said); a set port that is taken is
    the error returned. The embedded servers take free ports of their own."""
    from memora.infra.embedded import free_port

    if not _bindable(settings.host, settings.port):
        return f"port {settings.port} is in use: set another with MEMORA_PORT or --port"
    if not _bindable(settings.host, settings.query_port):
        if not settings.query_port_derived:
            return (
                f"port {settings.query_port} is in use: set another with MEMORA_QUERY_PORT "
                "or --query-port"
            )
        taken, settings.query_port = settings.query_port, free_port(settings.host)
        console.print(
            f"port {taken} (the API's + 1) is in use: the query service takes "
            f"{settings.query_port} (MEMORA_QUERY_PORT sets it)"
        )
    return None


def _bindable(host: str, port: int) -> bool:
    """Whether a server could listen on `port` now (as uvicorn binds: address reuse on)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _handle_signals(stack: Stack) -> threading.Event:
    """SIGINT and SIGTERM: the first stops the stack (cancelling its start if it is starting),
    a second kills every process at once. Returns the event `serve` sets once ready.

    The handler only writes the signal's number to a pipe: Python runs it in the main thread
    between two bytecodes, possibly while that thread holds the lock of the event it waits on
    (`stack.cancel.wait`), so setting the event there could wait forever for itself. A thread
    reading the pipe does the work."""
    ready = threading.Event()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def _act() -> None:
        while signum := os.read(read_end, 1)[0]:
            if stack.cancel.is_set():
                console.print("killing…")
                stack.abort(grace=0)
                os._exit(128 + signum)
            stack.cancel.set()

    def _note(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe has signals enough
            os.write(write_end, bytes([signum]))

    threading.Thread(target=_act, name="memora-signals", daemon=True).start()
    signal.signal(signal.SIGTERM, _note)
    signal.signal(signal.SIGINT, _note)
    return ready


def _run_until_stopped(stack: Stack, started: float, ready: threading.Event) -> None:
    """Start the stack, saying what is ready as it comes, then where it listens; watch it
    until SIGTERM or Ctrl-C."""
    stack.start()
    stack.wait_ready()
    ready.set()
    settings = stack.settings
    console.print(
        f"[green]Memora is ready[/] in {time.monotonic() - started:.1f} s — "
        f"API http://{settings.host}:{settings.port} · "
        f"query http://{settings.host}:{settings.query_port} · "
        f"logs {settings.data_dir / 'logs'}"
    )
    while not stack.cancel.wait(0.5):
        stack.revive_workers()  # a worker that exits is started again; any other exit stops all
        stack.check_alive()


def migrate() -> None:
    """Apply schema migrations to MEMORA_DATABASE_URL."""
    from memora.db.migrate import upgrade

    settings = Settings()
    upgrade(settings.require_database_url(), settings.embedding_dim, settings=settings)
    console.print("[green]schema is up to date[/]")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(migrate)
