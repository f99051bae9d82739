"""`memora worker` (a Celery worker with its metrics set up) and `memora worker-ready` (its exec
probe). The Celery app is imported inside the command, once PROMETHEUS_MULTIPROC_DIR is set."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from memora.basics.config import Settings

console = Console(stderr=True)


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
    settings = Settings()
    selected = selected_queues(queues, stage or [])
    directory = prepare_metrics_dir(settings)
    if metrics_port is not None:
        os.environ["MEMORA_WORKER_METRICS_PORT"] = str(metrics_port)
    console.print(f"worker for {','.join(selected)}; metrics files in {directory}")
    from services.workers.queues import pool_options
    from services.workers.tasks import app as celery_app  # after PROMETHEUS_MULTIPROC_DIR

    argv = ["worker", "-Q", ",".join(selected), "--loglevel", loglevel]
    argv += pool_options(settings, selected, concurrency or settings.worker_concurrency)
    if hostname:
        argv += ["-n", hostname]
    celery_app.worker_main(argv)


def selected_queues(queues: str | None, stages: list[str]) -> list[str]:
    """The queues of `--queues`, then both queues of each `--stage`; every queue by default."""
    from memora.basics.stages import INGEST_STAGES, Stage, all_queues, queue_for

    selected = [q.strip() for q in (queues or "").split(",") if q.strip()]
    for name in stages:
        stage = Stage(name)
        selected.append(queue_for(stage))
        if stage in INGEST_STAGES:
            selected.append(queue_for(stage, backfill=True))
    return selected or all_queues()


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
    app.command()(worker)
    app.command("worker-ready")(worker_ready)
