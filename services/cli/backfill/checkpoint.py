"""Where a backfill run starts: the saved checkpoint, when it is for this target and archive."""

from __future__ import annotations

from memora.interchange.archives import Checkpoint, Format, content_hash, fingerprint, target_of
from services.cli.backfill.options import BackfillError, BackfillOptions


def resume(options: BackfillOptions, fmt: Format) -> tuple[Checkpoint, bool]:
    """The checkpoint to go on from (a fresh one with --restart or --dry-run, or when none was
    saved), and whether it says the same archive was already posted in full."""
    archive = options.path
    current = Checkpoint(
        str(archive.resolve()),
        fmt,
        fingerprint(archive),
        archive.stat().st_size,
        target=target_of(options.api_url, options.api_key),
        content_sha256=options.content_sha256 or content_hash(archive),
    )
    saved = None if options.restart or options.dry_run else Checkpoint.load(options.checkpoint)
    if saved is None:
        return current, False
    _check(saved, current, options)
    saved.target = current.target
    same = (
        saved.content_sha256 == current.content_sha256
        if saved.content_sha256
        else saved.size == current.size
    )
    complete = saved.finished and same
    saved.size, saved.finished = current.size, False
    saved.content_sha256 = current.content_sha256
    return saved, complete


def _check(saved: Checkpoint, current: Checkpoint, options: BackfillOptions) -> None:
    """Refuse a checkpoint written for another target, or for an archive since changed."""
    path, archive = options.checkpoint, options.path
    if saved.target and saved.target != current.target:
        raise BackfillError(
            f"the checkpoint {path} is for another target ({saved.target.split()[0]}, or "
            "another API key); use another --checkpoint (or none: the default is kept per "
            "target), or --restart"
        )
    if saved.fingerprint != current.fingerprint or saved.size > current.size:
        raise BackfillError(
            f"{archive} changed since the checkpoint {path} was written; "
            "run again with --restart to post it from the beginning (nothing is duplicated)"
        )
