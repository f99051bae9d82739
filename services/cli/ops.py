"""Operations commands of `memora`: status, worker and worker-ready.

Registered on the main Typer app by `register(app)`. Heavy modules are imported inside the
commands so that `memora worker-ready` (an exec probe) and `memora --help` start quickly, and so
that `memora worker` can set PROMETHEUS_MULTIPROC_DIR before prometheus-client is imported.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from memora.basics.config import Settings

console = Console(stderr=True)


def status(
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Queue depths and operations per state (MEMORA_BROKER_URL, MEMORA_DATABASE_URL)."""
    from services.cli.status import collect_status, print_status

    result = collect_status(Settings())
    if json_output:
        print(json.dumps(result.as_dict()))
    else:
        print_status(Console(), result)
    if len(result.errors) == 2:
        raise typer.Exit(1)


def worker(
    queues: Annotated[
        str | None,
        typer.Option("--queues", "-Q", help="comma-separated queues (default: all of them)"),
    ] = None,
    stage: Annotated[
        list[str] | None,
        typer.Option(help="consume this stage's live and backfill queues (repeatable)"),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", help="pool processes")
    ] = None,
    hostname: Annotated[str | None, typer.Option("--hostname", "-n")] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", "-l")] = "INFO",
    metrics_port: Annotated[
        int | None, typer.Option(help="port of /metrics (MEMORA_WORKER_METRICS_PORT; 0: none)")
    ] = None,
) -> None:
    """A Celery worker with Prometheus multiprocess metrics set up (PROMETHEUS_MULTIPROC_DIR)."""
    from memora.basics.stages import INGEST_STAGES, Stage, all_queues, queue_for

    settings = Settings()
    selected: list[str] = [q.strip() for q in (queues or "").split(",") if q.strip()]
    for name in stage or []:
        s = Stage(name)
        selected.append(queue_for(s))
        if s in INGEST_STAGES:
            selected.append(queue_for(s, backfill=True))
    selected = selected or all_queues()
    directory = prepare_metrics_dir(settings)
    if metrics_port is not None:
        os.environ["MEMORA_WORKER_METRICS_PORT"] = str(metrics_port)
    console.print(f"worker for {','.join(selected)}; metrics files in {directory}")
    from services.workers.tasks import app as celery_app  # after PROMETHEUS_MULTIPROC_DIR

    argv = ["worker", "-Q", ",".join(selected), "--loglevel", loglevel]
    argv += ["-c", str(concurrency or settings.worker_concurrency)]
    if hostname:
        argv += ["-n", hostname]
    celery_app.worker_main(argv)


def prepare_metrics_dir(settings: Settings) -> str:
    """PROMETHEUS_MULTIPROC_DIR for this worker (set and emptied); must run before
    prometheus-client is imported, which decides the mode at import."""
    if "prometheus_client" in sys.modules and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        console.print("[yellow]prometheus_client already imported: pool metrics not shared[/]")
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(
        settings.data_dir / "metrics" / f"worker-{os.getpid()}"
    )
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    Path(directory).mkdir(parents=True, exist_ok=True)
    for stale in Path(directory).glob("*.db"):
        stale.unlink(missing_ok=True)
    return directory


def worker_ready(
    heartbeat_file: Annotated[
        Path | None, typer.Option(help="default MEMORA_WORKER_HEARTBEAT_FILE")
    ] = None,
    max_age: Annotated[float, typer.Option(help="seconds since the last heartbeat")] = 30.0,
) -> None:
    """Exit 0 when the worker here is consuming (a fresh heartbeat file), else 1: an exec probe."""
    from services.workers.probe import check_heartbeat, heartbeat_path

    ok, message = check_heartbeat(heartbeat_file or heartbeat_path(Settings()), max_age)
    print(message)
    raise typer.Exit(0 if ok else 1)


def register(app: typer.Typer) -> None:
    app.command()(status)
    app.command()(worker)
    app.command("worker-ready")(worker_ready)
