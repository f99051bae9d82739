"""The backfill run: the archive read from its checkpoint on, documents posted concurrently and
settled in archive order, the checkpoint saved every second and at the end; then, with --wait,
the wait until everything posted is searchable."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType

import httpx
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

from memora.basics.stages import TERMINAL, OperationStatus
from memora.interchange.archives import Checkpoint, Document, Format, detect_format, read_documents
from memora_client import MemoraError
from services.cli.backfill.backpressure import Backpressure
from services.cli.backfill.checkpoint import resume
from services.cli.backfill.options import BackfillError, BackfillOptions
from services.cli.backfill.posting import Posted, Poster, connect
from services.cli.backfill.summary import Summary, print_summary

SAVE_EVERY = 1.0  # seconds between two saves of the checkpoint (and progress updates)
SKIPPED_SHOWN = 20  # unreadable lines printed; the others are only counted


@dataclass
class _Pass:
    """One pass over the archive: its checkpoint, and the documents posted but not yet settled,
    in archive order."""

    checkpoint: Checkpoint
    progress: Progress
    task: TaskID
    executor: ThreadPoolExecutor
    window: deque[tuple[Document, Future[Posted]]] = field(default_factory=deque)
    started: float = field(default_factory=time.monotonic)
    saved_at: float = 0.0
    prior_seconds: float = field(init=False)  # earlier runs' time, from the checkpoint

    def __post_init__(self) -> None:
        self.prior_seconds = self.checkpoint.seconds


class Backfill:
    """One `memora backfill` run against a write API client."""

    def __init__(
        self, options: BackfillOptions, client: httpx.Client, console: Console | None = None
    ) -> None:
        self.o = options
        self.client = client
        self.console = console or Console(stderr=True)
        self.stop = threading.Event()
        self.summary = Summary()
        self.pending_operations: deque[str] = deque()
        self.poster = Poster(
            client,
            options.priority,
            options.retries,
            self.summary,
            self.stop,
            append=options.update_mode == "append",
        )
        self.backpressure = Backpressure(client, options, self.summary, self.stop)
        self.label = "checking" if options.dry_run else "backfill"

    def run(self) -> Summary:
        """Post the archive from its checkpoint on; with --wait, then wait until searchable."""
        fmt = self.o.fmt or detect_format(self.o.path)
        checkpoint, self.summary.already_complete = resume(self.o, fmt)
        self.summary.resumed_at = checkpoint.documents
        if self.summary.already_complete:
            self.summary.total_documents = checkpoint.documents
            return self.summary
        self._post_archive(fmt, checkpoint)
        if self.o.wait and not self.summary.interrupted:
            self.wait_searchable()
        return self.summary

    def _post_archive(self, fmt: Format, checkpoint: Checkpoint) -> None:
        """Every document after the checkpoint; Ctrl-C settles what is in flight and stops."""
        size = max(1, self.o.path.stat().st_size)
        progress = _progress_bar(self.console, self.o.progress)
        task = progress.add_task(self.label, total=size, stats="")
        executor = ThreadPoolExecutor(max_workers=max(1, self.o.concurrency))
        run = _Pass(checkpoint, progress, task, executor)
        documents = self._documents(fmt, run)
        try:
            with progress:
                for doc in documents:
                    self._take(doc, run)
                while run.window:
                    self._settle(run)
                progress.update(task, completed=size, stats=self._stats(run))
            checkpoint.finished = True
        except KeyboardInterrupt:
            self._interrupted(run)
        finally:
            self._close(run)

    def _documents(self, fmt: Format, run: _Pass) -> Iterator[Document]:
        """The archive's documents after the checkpoint; unreadable lines are counted."""

        def problem(line: int, reason: str) -> None:
            self.summary.skipped_items += 1
            run.checkpoint.skipped_items += 1
            if self.summary.skipped_items <= SKIPPED_SHOWN:
                run.progress.console.print(f"[yellow]skipped (line {line}): {reason}[/]")

        return read_documents(
            self.o.path,
            fmt,
            default_agent=self.o.agent,
            max_items=self.o.max_items,
            resume=run.checkpoint.resume,
            on_problem=problem,
        )

    def _take(self, doc: Document, run: _Pass) -> None:
        """Count the document (--dry-run) or post it, settling the answers in; every second,
        show the progress and save the checkpoint."""
        if self.o.dry_run:
            self.summary.documents += 1
            self.summary.items += len(doc.items)
        else:
            self.backpressure.pause_while_full(run.progress, run.task)
            if self.o.update_mode == "append":  # one conversation's parts: appended in order
                wait([f for d, f in run.window if d.conversation == doc.conversation])
            run.window.append((doc, run.executor.submit(self.poster.post, doc)))
            while run.window and (
                len(run.window) >= 2 * self.o.concurrency or run.window[0][1].done()
            ):
                self._settle(run)
        if time.monotonic() - run.saved_at > SAVE_EVERY:
            run.progress.update(
                run.task, completed=doc.bytes_read, description=self.label, stats=self._stats(run)
            )
            if not self.o.dry_run:
                run.checkpoint.seconds = run.prior_seconds + time.monotonic() - run.started
                run.checkpoint.save(self.o.checkpoint)
            run.saved_at = time.monotonic()

    def _settle(self, run: _Pass) -> None:
        """The oldest document in flight, once answered: counted, and the checkpoint past it."""
        doc, future = run.window.popleft()
        outcome, operation_id, error = future.result()
        s, checkpoint = self.summary, run.checkpoint
        s.documents += 1
        s.items += len(doc.items)
        checkpoint.documents += 1
        checkpoint.items += len(doc.items)
        if outcome == "failed":
            s.failed += 1
            checkpoint.failed += 1
            self._log_failure(doc, error or "")
        else:
            s.outcomes[outcome] = s.outcomes.get(outcome, 0) + 1
            checkpoint.outcomes[outcome] = checkpoint.outcomes.get(outcome, 0) + 1
            if self.o.wait and outcome != "unchanged" and operation_id:
                self.pending_operations.append(operation_id)
        checkpoint.resume = doc.resume

    def _log_failure(self, doc: Document, error: str) -> None:
        path = self.o.failures_log
        self.summary.failures_log = str(path)
        with path.open("a", encoding="utf-8") as handle:
            record = {
                "document_id": doc.document_id,
                "agent_id": doc.agent_id,
                "error": error,
                "at": datetime.now(UTC).isoformat(),
            }
            handle.write(json.dumps(record) + "\n")

    def _stats(self, run: _Pass) -> str:
        s = self.summary
        elapsed = time.monotonic() - run.started
        rate = s.items / elapsed if elapsed > 0 else 0.0
        return f"{s.documents} docs · {s.items} items · {rate:,.0f} items/s · {s.failed} failed"

    def _interrupted(self, run: _Pass) -> None:
        """Ctrl-C: no new posts; the answers of the posts already sent are settled in."""
        self.summary.interrupted = True
        self.stop.set()
        run.executor.shutdown(wait=False, cancel_futures=True)
        self.console.print("[yellow]interrupted: finishing the requests in flight…[/]")
        while run.window and not run.window[0][1].cancelled():
            try:
                self._settle(run)
            except (BackfillError, KeyboardInterrupt):
                break

    def _close(self, run: _Pass) -> None:
        """However the pass ended: the threads stopped, the time counted, the checkpoint saved."""
        self.stop.set()
        run.executor.shutdown(wait=True, cancel_futures=True)
        self.summary.seconds = time.monotonic() - run.started
        self.summary.total_documents = run.checkpoint.documents
        if not self.o.dry_run:
            run.checkpoint.seconds = run.prior_seconds + self.summary.seconds
            run.checkpoint.save(self.o.checkpoint)

    def wait_searchable(self, poll: float = 0.5) -> None:
        """Until every operation this run started is terminal (completed: searchable)."""
        started = time.monotonic()
        total = len(self.pending_operations)
        progress = _wait_bar(self.console, self.o.progress)
        try:
            with progress:
                task = progress.add_task("processing", total=max(total, 1))
                while self.pending_operations:
                    status = self._status(self.pending_operations[0])
                    if status in TERMINAL:
                        self.pending_operations.popleft()
                        self.summary.failed_operations += status == OperationStatus.FAILED
                        progress.update(task, completed=total - len(self.pending_operations))
                    else:
                        time.sleep(poll)
        except KeyboardInterrupt:
            self.summary.interrupted = True
            return
        self.summary.searchable_seconds = time.monotonic() - started

    def _status(self, operation_id: str) -> str | None:
        """The operation's status; None when the API cannot tell now."""
        try:
            return self.poster.memora.operation(operation_id).status
        except MemoraError:
            return None


def _progress_bar(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
        transient=False,
    )


def _wait_bar(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
    )


def run_command(options: BackfillOptions, console: Console, json_summary: bool) -> int:
    """`memora backfill` once its options are read: SIGTERM stops it like Ctrl-C; the summary
    on stderr (and as JSON on stdout). The exit code: 0, 1 (stopped) or 130 (interrupted)."""
    signal.signal(signal.SIGTERM, _terminate)
    with connect(options.api_url, options.timeout, options.api_key) as client:
        try:
            summary = Backfill(options, client, console).run()
        except BackfillError as exc:
            console.print(f"[red]backfill stopped[/]: {exc}")
            console.print(f"progress is saved in {options.checkpoint}; run again to resume")
            return 1
    print_summary(console, summary, options.checkpoint)
    if json_summary:
        print(json.dumps(summary.as_dict()))
    return 130 if summary.interrupted else 0


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
