"""`memora reembed --model NAME`: move every stored vector (memories, conversation chunks) to
another embedding model beside the live ones, switch in one short transaction, drop the old
ones; extraction is not run again and searches go on (memora.usecases.reembed,
docs/operations.md "Changing the embedding model"). Interrupted (Ctrl-C), the same command
resumes where it stopped. `--status` says where it stands; `--abandon` drops a build.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from memora.basics.config import Settings

console = Console(stderr=True)
Provider = Annotated[
    str | None,
    typer.Option(help="local, openai or ollama (default: MEMORA_EMBEDDING_PROVIDER)"),
]


def reembed(
    model: Annotated[
        str | None, typer.Option(help="the model to move to (a name, or a local path)")
    ] = None,
    provider: Provider = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="a remote provider's base URL (default: MEMORA_EMBEDDING_BASE_URL)"),
    ] = None,
    dim: Annotated[
        int | None, typer.Option(min=1, help="the vectors' dimension (default: the model's)")
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="texts embedded a batch")] = 256,
    status: Annotated[bool, typer.Option("--status", help="where a reembed stands")] = False,
    abandon: Annotated[
        bool, typer.Option("--abandon", help="drop the generation being built")
    ] = False,
) -> None:
    """Re-embed every memory and conversation chunk with another model, then switch to it."""
    from memora.usecases import reembed as usecase

    settings = Settings()
    if status:
        typer.echo(json.dumps(usecase.status(settings), indent=2, default=str))  # stdout
    elif abandon:
        dropped = usecase.abandon(settings)
        console.print("dropped the generation being built" if dropped else "none was built")
    elif model is None:
        console.print("[red]--model is required (or --status, --abandon)[/]")
        raise typer.Exit(2)
    else:
        chosen = provider or settings.embedding_provider
        same = chosen == settings.embedding_provider
        url = base_url or (settings.embedding_base_url if same else None)
        target = usecase.Target(model, chosen, url if chosen != "local" else None, dim)
        _run(settings, target, batch_size)


def _run(settings: Settings, target: Any, batch_size: int) -> None:
    """The build and switch with a progress bar a phase; resumable after Ctrl-C."""
    from psycopg.errors import LockNotAvailable

    from memora.basics.errors import Conflict, Invalid
    from memora.usecases import reembed as usecase

    with _bar() as bar:
        tasks: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        try:
            result = usecase.run(settings, target, batch_size=batch_size, progress=progress)
        except (Conflict, Invalid, RuntimeError) as exc:
            console.print(f"[red]reembed: {exc}[/]")
            raise typer.Exit(1) from exc
        except LockNotAvailable as exc:
            console.print(f"[red]reembed: {exc}: a long transaction holds it; run again[/]")
            raise typer.Exit(1) from exc
        except KeyboardInterrupt:
            console.print("[yellow]interrupted: run the same command again to resume[/]")
            raise typer.Exit(130) from None
    live = result["live"]
    if not result["switched"]:
        console.print(f"[green]{live['model']} is already the live model[/]")
        return
    console.print(
        f"[green]switched to {live['model']} ({live['provider']}, {live['dim']}-d): "
        f"{result['embedded']} texts embedded[/]. Set MEMORA_EMBEDDING_MODEL={live['model']}, "
        f"MEMORA_EMBEDDING_PROVIDER={live['provider']} and MEMORA_EMBEDDING_DIM={live['dim']} "
        "for the next deployment (running processes already follow it)."
    )


def _bar() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
    )


def register(app: typer.Typer) -> None:
    app.command("reembed")(reembed)
