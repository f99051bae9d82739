"""`memora seed FILE` and `memora mcp --agent ID`: agent simulations against a running API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import yaml
from rich.console import Console

from memora.basics.config import Settings

console = Console(stderr=True)

ApiOption = Annotated[
    str | None, typer.Option("--api", help="the Memora API (default: this machine's MEMORA_PORT)")
]
KeyOption = Annotated[
    str | None, typer.Option(envvar="MEMORA_API_KEY", help="API key (when the API requires one)")
]


def _api_url(api: str | None) -> str:
    settings = Settings()
    return api or f"http://{settings.host}:{settings.port}"


def read_seed(path: Path) -> Any:
    """A seed file, YAML or JSON (JSON is YAML too)."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}") from exc


def seed(
    path: Annotated[Path, typer.Argument(help="seed file: scenario and characters (YAML/JSON)")],
    api: ApiOption = None,
    api_key: KeyOption = None,
) -> None:
    """Pre-seed characters and their scenario as memories (POST /api/seed); idempotent."""
    body = read_seed(path)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.post(
            f"{_api_url(api)}/api/seed", json=body, headers=headers, timeout=300.0
        )
    except httpx.HTTPError as exc:
        console.print(f"[red]Memora API unreachable[/]: {exc}")
        raise typer.Exit(1) from exc
    if response.status_code != 200:
        console.print(f"[red]seed refused ({response.status_code})[/]: {response.text}")
        raise typer.Exit(1)
    result = response.json()
    console.print(f"scenario {result['scenario']}: {result['counts']}")
    print(json.dumps(result["counts"]))


def mcp(
    agent: Annotated[str, typer.Option("--agent", help="the agent whose memory is served")],
    api: ApiOption = None,
    api_key: KeyOption = None,
) -> None:
    """Serve one agent's memory as an MCP server over stdio (for desktop MCP clients)."""
    from services.api.mcp.server import run_stdio  # the MCP SDK: only when the command runs

    run_stdio(agent, _api_url(api), api_key)


def register(app: typer.Typer) -> None:
    app.command()(seed)
    app.command()(mcp)
