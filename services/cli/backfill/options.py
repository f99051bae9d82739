"""The options of a backfill run, built from the command line; the error that stops a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

import typer

from memora.basics.config import Settings
from memora.interchange.archives import Format, checkpoint_name, content_hash, target_of

FORMATS = ("auto", "jsonl", "locomo")
UPDATE_MODES = ("replace", "append")
PRIORITIES = ("backfill", "live")


class BackfillError(Exception):
    """The run cannot go on (the API is unreachable, the archive changed...)."""


@dataclass
class BackfillOptions:
    path: Path
    api_url: str
    checkpoint: Path
    fmt: Format | None = None
    agent: str | None = None
    priority: str = "backfill"
    # "append": each document's messages are appended to its conversation (parts of a long
    # conversation and runs of message lines become one conversation; re-runs add only what
    # is new); "replace": each document is posted whole under its own id.
    update_mode: str = "replace"
    concurrency: int = 4
    max_items: int = 500
    # Backfill-queue messages; 0: never pause. Kept small enough that a document waits in a
    # queue for less than MEMORA_STUCK_AFTER_SECONDS, or the reconciler takes it for lost.
    max_backlog: int = 500
    retries: int = 8
    restart: bool = False
    dry_run: bool = False
    wait: bool = False
    progress: bool = True
    timeout: float = 120.0
    # Who posts: checkpoints are kept per target (target_of(api_url, api_key)).
    api_key: str | None = None
    content_sha256: str | None = None  # the archive's content_hash, when already computed

    @property
    def failures_log(self) -> Path:
        """Where refused documents are logged, beside the checkpoint."""
        return self.checkpoint.with_name(self.checkpoint.name + ".failures.jsonl")


def default_checkpoint(data_dir: Path, archive: Path, target: str, content: str) -> Path:
    """One checkpoint per target (API URL and key) and archive content (`content_hash`)."""
    return data_dir / "backfill" / checkpoint_name(archive, target, content)


class PassedOn(TypedDict):
    """The options of the command line that `BackfillOptions` takes as they are."""

    agent: str | None
    update_mode: str
    concurrency: int
    max_items: int
    max_backlog: int
    restart: bool
    wait: bool
    dry_run: bool
    progress: bool


def from_command_line(
    path: Path,
    *,
    api: str | None,
    fmt: str,
    checkpoint: Path | None,
    priority: str,
    api_key: str | None,
    **passed_on: Unpack[PassedOn],
) -> BackfillOptions:
    """The options of `memora backfill`, with the settings' API URL and key when not given, and
    the default checkpoint of this target and archive content."""
    if fmt not in FORMATS:
        raise typer.BadParameter("--format must be auto, jsonl or locomo")
    if priority not in PRIORITIES:
        raise typer.BadParameter("--priority must be backfill or live")
    if passed_on["update_mode"] not in UPDATE_MODES:
        raise typer.BadParameter("--update-mode must be replace or append")
    settings = Settings()
    api_url = api or settings.resolved_api_url
    api_key = api_key or (settings.api_key.get_secret_value() if settings.api_key else None)
    content = content_hash(path)  # streamed; the checkpoint is kept per archive content
    if checkpoint is None:
        target = target_of(api_url, api_key)
        checkpoint = default_checkpoint(settings.data_dir, path, target, content)
    return BackfillOptions(
        path=path,
        api_url=api_url,
        api_key=api_key,
        content_sha256=content,
        checkpoint=checkpoint,
        fmt=None if fmt == "auto" else fmt,  # type: ignore[arg-type]
        priority=priority,
        **passed_on,
    )
