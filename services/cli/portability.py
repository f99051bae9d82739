"""`memora export` and `memora import`: an agent (or a tenant's agents) as an NDJSON file, and
such a file into a server, through the API (MEMORA_API_URL and MEMORA_API_KEY), so they work
against a remote server (docs/operations.md "Export and import")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from memora_client import MemoraClient

console = Console(stderr=True)
Api = Annotated[
    str | None,
    typer.Option(help="API base URL (env MEMORA_API_URL; default http://MEMORA_HOST:MEMORA_PORT)"),
]
ApiKey = Annotated[str | None, typer.Option(help="API key (env MEMORA_API_KEY)")]
Timeout = Annotated[float, typer.Option(help="seconds without data before giving up")]


def _client(api: str | None, api_key: str | None, timeout: float) -> MemoraClient:
    from memora.basics.config import Settings
    from memora_client import MemoraClient

    settings = Settings()
    key = api_key or (settings.api_key.get_secret_value() if settings.api_key else None)
    return MemoraClient(api or settings.resolved_api_url, api_key=key, timeout=timeout)


def export(
    output: Annotated[Path, typer.Option("-o", "--output", help="the file to write")],
    agent: Annotated[
        str | None, typer.Option(help="the agent to export (default: every agent of the tenant)")
    ] = None,
    api: Api = None,
    api_key: ApiKey = None,
    timeout: Timeout = 300.0,
) -> None:
    """Export an agent, or every agent of the key's tenant, as NDJSON."""
    from memora_client import MemoraError

    client = _client(api, api_key, timeout)
    try:
        with client:
            written = client.export_agent(agent, output)
    except MemoraError as exc:
        output.unlink(missing_ok=True)  # never leave a partial export behind
        console.print(f"[red]export failed: {exc}[/]")
        raise typer.Exit(1) from exc
    console.print(f"[green]exported {agent or 'the tenant'} to {output} ({written} bytes)[/]")


def import_(
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="an export file")],
    api: Api = None,
    api_key: ApiKey = None,
    timeout: Timeout = 3600.0,
    json_output: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Import an export file into the key's tenant: all of it, or nothing (the error names
    the line). Importing the same file again changes nothing."""
    from memora_client import MemoraError

    client = _client(api, api_key, timeout)
    try:
        with client:
            result = client.import_file(path)
    except MemoraError as exc:
        console.print(f"[red]import failed, nothing imported: {exc}[/]")
        raise typer.Exit(1) from exc
    if json_output:
        print(json.dumps(result.model_dump()))
    console.print(
        f"[green]imported {', '.join(result.agents) or 'no agent'}: "
        f"{sum(result.imported.values())} rows written, "
        f"{sum(result.unchanged.values())} already there[/]"
    )


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)
