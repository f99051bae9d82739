"""`memora db wait`: block until the database schema is at least this code's head.

Run as an init container (deploy/k8s) so that a pod of a new release starts only once its
release's migration Job has run; pods of the previous release keep running on a newer schema.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console

from memora.basics.config import Settings

console = Console(stderr=True)
db_app = typer.Typer(help="The database schema.", no_args_is_help=True)
READY = ("current", "ahead")


@db_app.command("wait")
def wait(
    timeout: Annotated[float, typer.Option(min=0, help="give up after this many seconds")] = 600,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between checks")] = 2.0,
) -> None:
    """Wait until MEMORA_DATABASE_URL's schema is at least this code's head; exit 1 on timeout."""
    from sqlalchemy.exc import DBAPIError  # with alembic, only when the command runs

    from memora.db.migrate import head_revision, schema_state

    url = Settings().require_database_url()
    head = head_revision()
    deadline = time.monotonic() + timeout
    said = ""
    while True:
        try:
            state: str = schema_state(url)
        except DBAPIError as exc:
            state = f"unreachable ({type(exc.orig).__name__})"
        if state in READY:
            console.print(f"[green]schema is {state}[/] (this code's head: {head})")
            return
        if state != said:
            console.print(f"waiting for schema {head}: database is {state}")
            said = state
        if time.monotonic() >= deadline:
            console.print(f"[red]schema not at {head} after {timeout:g} s[/]")
            raise typer.Exit(1)
        time.sleep(interval)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
