"""`memora demo`: the main job on the embedded default, end to end through the real pipeline.

The stack and the HTTP client are imported when the command runs (services/cli/main.py)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from memora.basics.config import Settings
from memora.basics.stages import TERMINAL, OperationStatus

if TYPE_CHECKING:
    import httpx

console = Console()
QUESTIONS = (
    "Where does Maya work?",
    "What happened with the lidar calibration?",
    "What did Maya do with Lena in the summer?",
    "Does Maya have any allergies?",
)


def demo(
    archive: Annotated[
        Path | None, typer.Option(help="JSONL archive (default: the bundled sample)")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="where embedded servers keep data")] = None,
) -> None:
    """Start the stack, ingest a sample conversation archive through the API, and query it."""
    sys.exit(run_demo(archive, data_dir))


def run_demo(archive: Path | None, data_dir: Path | None) -> int:
    """0 when the operation of every conversation of the archive completed, else 1."""
    import httpx

    from memora.infra.embedded import free_port
    from memora.interchange.archives import sample_archive
    from services.cli.stack import Stack

    archive = archive or sample_archive()
    settings = Settings(
        data_dir=data_dir or Path(tempfile.gettempdir()) / "memora-demo",
        port=free_port(),
        query_port=free_port(),
    )
    console.rule("Memora demo")
    console.print(
        "starting PostgreSQL+pgvector, Redis, API, query service and workers in "
        f"{settings.data_dir}"
    )
    with Stack(settings, log_dir=settings.data_dir / "logs") as stack:
        stack.wait_ready()
        base = f"http://{settings.host}:{settings.port}"
        with httpx.Client(base_url=base, timeout=60) as client:
            started = time.monotonic()
            agent_id, op_ids, items = post_archive(client, archive)
            console.print(f"posted {len(op_ids)} conversations ({items} messages) to {base}")
            states = wait_for_operations(client, op_ids)
            done = sum(1 for s in states.values() if s == OperationStatus.COMPLETED)
            console.print(
                f"{done}/{len(op_ids)} operations completed in {time.monotonic() - started:.1f}s"
            )
            for question in QUESTIONS:
                ask(client, agent_id, question)
            return 0 if done == len(op_ids) else 1


def post_archive(client: httpx.Client, archive: Path) -> tuple[str, list[str], int]:
    """Each conversation of the archive to the write API: (the agent, the operation ids, the
    messages)."""
    from memora.interchange.archives import detect_format, read_documents

    op_ids: list[str] = []
    agent_id = "default"
    items = 0
    for doc in read_documents(archive, detect_format(archive)):
        agent_id = doc.agent_id
        body = {
            "agent_id": doc.agent_id,
            "document_id": doc.document_id,
            "items": [i.model_dump(mode="json", exclude_none=True) for i in doc.items],
        }
        response = client.post("/api/memories/batch", json=body)
        response.raise_for_status()
        op_ids.append(response.json()["operation_id"])
        items += len(doc.items)
    return agent_id, op_ids, items


def wait_for_operations(
    client: httpx.Client, operation_ids: list[str], timeout: float = 600
) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    pending = set(operation_ids)
    while pending and time.monotonic() < deadline:
        for op_id in sorted(pending):
            body = client.get(f"/api/operations/{op_id}").json()
            if body["status"] in TERMINAL:
                states[op_id] = body["status"]
                pending.discard(op_id)
                if body["status"] == OperationStatus.FAILED:
                    console.print(f"[red]operation {op_id} failed: {body['error']}[/]")
        time.sleep(0.3)
    for op_id in pending:
        states[op_id] = "timeout"
    return states


def ask(client: httpx.Client, agent_id: str, question: str) -> None:
    """Search the agent's memory and print the top three hits."""
    result = client.post("/api/search", json={"agent_id": agent_id, "query": question, "top_k": 3})
    result.raise_for_status()
    table = Table(title=question, show_lines=False)
    table.add_column("weight", justify="right")
    table.add_column("memory")
    for hit in result.json()["results"]:
        table.add_row(f"{hit['weight']:.3f}", hit["text"])
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(demo)
