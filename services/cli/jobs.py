"""`memora jobs list|run`: the periodic jobs of memora.jobs, run once now (beat runs them on
their schedule), against MEMORA_DATABASE_URL and MEMORA_BROKER_URL."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from memora.basics.config import Settings
from memora.basics.tenancy import Scope
from services.cli.context import cli_context

console = Console(stderr=True)
jobs_app = typer.Typer(help="Periodic jobs: list them, run one now.", no_args_is_help=True)


# The jobs, the pool and Celery are imported inside the commands: every `memora` command loads
# this module, and `memora worker` must set PROMETHEUS_MULTIPROC_DIR and its settings before
# prometheus-client and the Celery app are first imported (services/cli/main.py).


@jobs_app.command("list")
def list_jobs() -> None:
    """Each job with its schedule (seconds; 0: not scheduled) and what it does."""
    from memora.jobs import JOBS

    settings = Settings()
    table = Table("job", "every (s)", "what it does")
    for name, spec in JOBS.items():
        table.add_row(name, f"{max(spec.interval_seconds(settings), 0):g}", spec.description)
    Console().print(table)


@jobs_app.command("run")
def run(
    name: Annotated[str, typer.Argument(help="the job (see `memora jobs list`)")],
    agent: Annotated[
        str | None, typer.Option(help="only this agent (default: every agent)")
    ] = None,
    tenant: Annotated[str, typer.Option(help="the agent's tenant")] = "default",
) -> None:
    """Run one job now and print what it examined and changed (JSON)."""
    from memora.db.pool import make_pool
    from memora.jobs import JOBS, JobContext, run_job
    from services.workers.celery_app import create_celery
    from services.workers.dispatch import CeleryStages

    spec = JOBS.get(name)
    if spec is None:
        console.print(f"[red]no job {name!r}; jobs: {', '.join(JOBS)}[/]")
        raise typer.Exit(2)
    settings = Settings()
    pool = make_pool(settings.require_database_url(), min_size=1, max_size=2, name="cli-job")
    try:
        ctx = JobContext(
            settings,
            pool,
            CeleryStages(create_celery(settings)),  # webhook deliveries: sent by the job itself
            agent_key=Scope(tenant).key(agent) if agent else None,
        )
        result = run_job(spec, ctx)
    finally:
        pool.close()
    print(
        json.dumps(
            {"job": name, "examined": result.examined, "changed": result.changed} | result.details
        )
    )


def repair(
    agent: Annotated[
        str | None, typer.Option(help="only this agent (default: every agent)")
    ] = None,
    tenant: Annotated[str, typer.Option(help="the agent's tenant")] = "default",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="report, change nothing")] = False,
) -> None:
    """The conversation consistency check (orphaned chunks and units, messages never indexed,
    stale chunks, units without an embedding) and its repair; prints the report (JSON).
    Repair operations go to the workers through MEMORA_BROKER_URL."""
    from memora.usecases.conversations import repair_agents

    key = Scope(tenant).key(agent) if agent else None
    with cli_context(Settings(), "cli-repair") as app, app.pool.connection() as conn:
        report = repair_agents(app, conn, key, dry_run=dry_run)
    print(json.dumps({"agent": agent, "dry_run": dry_run, **report.as_dict()}, default=str))


# The evolution worker's jobs (seed 002 §4.5), in the order `memora evolve` runs them.
EVOLUTION_JOBS = (
    "consolidate", "attenuate", "reflect", "graph_maintenance", "limits", "cleanup",
)  # fmt: skip


def evolve(
    agent: Annotated[
        str | None, typer.Option(help="only this agent (default: every agent)")
    ] = None,
    job: Annotated[
        str | None, typer.Option(help=f"only this job: {', '.join(EVOLUTION_JOBS)}")
    ] = None,
    tenant: Annotated[str, typer.Option(help="the agent's tenant")] = "default",
) -> None:
    """Run the memory evolution jobs now (one JSON line per job)."""
    names = EVOLUTION_JOBS if job is None else (job,)
    if job is not None and job not in EVOLUTION_JOBS:
        console.print(f"[red]no evolution job {job!r}; jobs: {', '.join(EVOLUTION_JOBS)}[/]")
        raise typer.Exit(2)
    for name in names:
        run(name, agent, tenant)


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app, name="jobs")
    app.command("repair")(repair)
    app.command("evolve")(evolve)
