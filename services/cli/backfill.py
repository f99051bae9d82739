"""`memora backfill PATH`: stream a conversation archive into the write API on the backfill queues.

- Streams the file (memora.interchange.archives): memory stays flat however large the archive is.
- Posts documents concurrently (`--concurrency`), in order of the archive for the checkpoint:
  the checkpoint advances over the longest prefix of documents the API acknowledged, and is
  saved (atomically) every second, on Ctrl-C or SIGTERM, and at the end. A re-run resumes
  there; documents posted twice are harmless (the API answers "unchanged" for identical
  content), so a crash loses nothing and duplicates nothing.
- The default checkpoint is keyed by target (API URL and a hash of the API key) and by the
  archive's content (SHA-256, streamed): the same archive posted to another server, or as
  another tenant, starts from the beginning; a re-run against the same one resumes.
- Sends `X-Memora-Priority: backfill`: the pipeline runs on the `<stage>.backfill` queues, which
  workers drain after their live queues; it pauses while those queues hold more than
  `--max-backlog` messages (read from the API's /metrics). When the depths cannot be read it
  says so on stderr and in the summary, posts on without pausing, and keeps trying to read them.
- Transient failures (connection errors, 408, 429, 5xx) are retried (tenacity): after the
  `Retry-After` the API sends with a 429 or 503, else with exponential back-off; a document
  the API refuses (4xx) is logged to `<checkpoint>.failures.jsonl` and counted, and the run
  goes on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity import wait_exponential as exponential

from memora.basics.stages import INGEST_STAGES, queue_for
from memora.interchange.archives import (
    Checkpoint,
    Document,
    Format,
    checkpoint_name,
    content_hash,
    detect_format,
    fingerprint,
    read_documents,
    target_of,
)

log = logging.getLogger("memora.backfill")
TERMINAL = ("completed", "failed", "superseded")
RETRIED_STATUSES = (408, 429)  # and every 5xx
MAX_RETRY_AFTER = 300.0  # seconds: a longer Retry-After is waited this long, then retried


class BackfillError(Exception):
    """The run cannot go on (the API is unreachable, the archive changed...)."""


class _Retryable(Exception):
    """A transient failure: connection error, 408, 429 or 5xx (with its Retry-After)."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.retry_after = retry_after


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None without one."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass
class BackfillOptions:
    path: Path
    api_url: str
    checkpoint: Path
    fmt: Format | None = None
    agent: str | None = None
    priority: str = "backfill"
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


@dataclass
class Summary:
    documents: int = 0
    items: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    skipped_items: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    already_complete: bool = False
    resumed_at: int = 0
    searchable_seconds: float | None = None
    failed_operations: int = 0
    total_documents: int = 0
    failures_log: str | None = None
    # "on"; "disabled" (--max-backlog 0); else why the queue depths could not be read
    backpressure: str = "on"
    retry_after_waits: int = 0  # 429/503 answers whose Retry-After was waited
    retry_after_seconds: float = 0.0

    @property
    def items_per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["items_per_second"] = round(self.items_per_second, 2)
        return data


def default_checkpoint(data_dir: Path, archive: Path, target: str, content: str) -> Path:
    """One checkpoint per target (API URL and key) and archive content (`content_hash`)."""
    return data_dir / "backfill" / checkpoint_name(archive, target, content)


class Backfill:
    def __init__(
        self, options: BackfillOptions, client: httpx.Client, console: Console | None = None
    ) -> None:
        self.o = options
        self.client = client
        self.console = console or Console(stderr=True)
        self.stop = threading.Event()
        self.summary = Summary()
        self.pending_operations: deque[str] = deque()
        self._backlog_checked = 0.0
        self._throttle = options.max_backlog > 0 and not options.dry_run
        self._backlog_problem = ""
        self._lock = threading.Lock()
        if options.max_backlog <= 0:
            self.summary.backpressure = "disabled (--max-backlog 0)"
        self._queues = {
            queue_for(s, backfill=options.priority == "backfill") for s in INGEST_STAGES
        }

    # ------------------------------------------------------------------------ checkpoint
    def _checkpoint(self, fmt: Format) -> Checkpoint:
        path, archive = self.o.checkpoint, self.o.path
        current = Checkpoint(
            str(archive.resolve()),
            fmt,
            fingerprint(archive),
            archive.stat().st_size,
            target=target_of(self.o.api_url, self.o.api_key),
            content_sha256=self.o.content_sha256 or content_hash(archive),
        )
        saved = None if self.o.restart or self.o.dry_run else Checkpoint.load(path)
        if saved is None:
            return current
        if saved.target and saved.target != current.target:
            raise BackfillError(
                f"the checkpoint {path} is for another target ({saved.target.split()[0]}, or "
                "another API key); use another --checkpoint (or none: the default is kept per "
                "target), or --restart"
            )
        saved.target = current.target
        if saved.fingerprint != current.fingerprint or saved.size > current.size:
            raise BackfillError(
                f"{archive} changed since the checkpoint {path} was written; "
                "run again with --restart to post it from the beginning (nothing is duplicated)"
            )
        same = (
            saved.content_sha256 == current.content_sha256
            if saved.content_sha256
            else saved.size == current.size
        )
        if saved.finished and same:
            self.summary.already_complete = True
        saved.size, saved.finished = current.size, False
        saved.content_sha256 = current.content_sha256
        return saved

    # ------------------------------------------------------------------------ posting
    def _post(self, doc: Document) -> tuple[str, str | None, str | None]:
        """(outcome, operation id, error); outcome "failed" for a refused document."""
        body = {
            "agent_id": doc.agent_id,
            "document_id": doc.document_id,
            "items": [i.model_dump(mode="json", exclude_none=True) for i in doc.items],
        }
        headers = {"X-Memora-Priority": self.o.priority}

        def attempt() -> tuple[str, str | None, str | None]:
            try:
                r = self.client.post("/api/memories/batch", json=body, headers=headers)
            except httpx.TransportError as exc:
                raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
            if r.status_code == 200:
                answer = r.json()
                return str(answer["status"]), str(answer["operation_id"]), None
            if r.status_code in (401, 403):  # every other document would fail the same way
                raise BackfillError(f"the API refused the key: HTTP {r.status_code} {r.text[:200]}")
            if r.status_code >= 500 or r.status_code in RETRIED_STATUSES:
                wait = retry_after(r) if r.status_code in (429, 503) else None
                raise _Retryable(f"HTTP {r.status_code}: {r.text[:200]}", wait)
            return "failed", None, f"HTTP {r.status_code}: {r.text[:500]}"

        retrying = Retrying(
            retry=retry_if_exception_type(_Retryable),
            stop=stop_after_attempt(self.o.retries + 1),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except _Retryable as exc:
            raise BackfillError(f"cannot post {doc.document_id!r}: {exc}") from exc

    _backoff = exponential(multiplier=0.5, max=30.0)

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it sent one (capped), else exponential back-off."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            wait = min(exc.retry_after, MAX_RETRY_AFTER)
            with self._lock:
                self.summary.retry_after_waits += 1
                self.summary.retry_after_seconds += wait
            return wait
        return float(self._backoff(state))

    def _sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise BackfillError("stopped while waiting to retry")

    def _settle(
        self,
        doc: Document,
        future: Future[tuple[str, str | None, str | None]],
        checkpoint: Checkpoint,
    ) -> None:
        outcome, operation_id, error = future.result()
        s = self.summary
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
        path = self.o.checkpoint.with_name(self.o.checkpoint.name + ".failures.jsonl")
        self.summary.failures_log = str(path)
        with path.open("a", encoding="utf-8") as handle:
            record = {
                "document_id": doc.document_id,
                "agent_id": doc.agent_id,
                "error": error,
                "at": datetime.now(UTC).isoformat(),
            }
            handle.write(json.dumps(record) + "\n")

    # ------------------------------------------------------------------------ backpressure
    def backlog(self) -> int | None:
        """Messages waiting on the backfill queues, from the API's /metrics; None when they
        cannot be read (the reason is left in `_backlog_problem`)."""
        try:
            r = self.client.get("/metrics")
        except httpx.HTTPError as exc:
            self._backlog_problem = f"GET /metrics failed: {type(exc).__name__}: {exc}"
            return None
        if r.status_code != 200:
            self._backlog_problem = f"GET /metrics answered HTTP {r.status_code}"
            return None
        depths = [
            s.value
            for family in text_string_to_metric_families(r.text)
            if family.name == "memora_queue_depth"
            for s in family.samples
            if s.labels.get("queue") in self._queues
        ]
        if not depths:
            self._backlog_problem = (
                "the API's /metrics has no memora_queue_depth for the backfill queues "
                "(an API without a broker, or one that cannot reach it)"
            )
            return None
        return int(sum(depths))

    def _wait_for_backlog(self, progress: Progress, task: Any) -> None:
        if not self._throttle or time.monotonic() - self._backlog_checked < 2.0:
            return
        self._backlog_checked = time.monotonic()
        while not self.stop.is_set():
            depth = self.backlog()
            if depth is None:
                self._backpressure_lost(progress)
                return
            if self.summary.backpressure != "on":
                progress.console.print("[green]queue depths readable again: backpressure on[/]")
                self.summary.backpressure = "on"
            if depth <= self.o.max_backlog:
                return
            progress.update(task, description=f"paused: {depth} messages queued")
            time.sleep(2.0)

    def _backpressure_lost(self, progress: Progress) -> None:
        """Loudly: posting goes on without pausing, which may flood the backfill queues."""
        problem = f"off: {self._backlog_problem}"
        if self.summary.backpressure != problem:
            progress.console.print(
                f"[bold yellow]warning: cannot read the backfill queue depths[/] "
                f"({self._backlog_problem}); posting WITHOUT backpressure (--max-backlog "
                f"{self.o.max_backlog} is not enforced) until they can be read again"
            )
            log.warning("backfill backpressure off: %s", self._backlog_problem)
        self.summary.backpressure = problem

    # ------------------------------------------------------------------------ run
    def run(self) -> Summary:
        fmt = self.o.fmt or detect_format(self.o.path)
        checkpoint = self._checkpoint(fmt)
        s = self.summary
        s.resumed_at = checkpoint.documents
        if s.already_complete:
            s.total_documents = checkpoint.documents
            return s
        size = max(1, self.o.path.stat().st_size)

        def problem(line: int, reason: str) -> None:
            s.skipped_items += 1
            checkpoint.skipped_items += 1
            if s.skipped_items <= 20:
                progress.console.print(f"[yellow]skipped (line {line}): {reason}[/]")

        documents = read_documents(
            self.o.path,
            fmt,
            default_agent=self.o.agent,
            max_items=self.o.max_items,
            resume=checkpoint.resume,
            on_problem=problem,
        )
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        started = time.monotonic()
        prior_seconds = checkpoint.seconds
        saved_at = 0.0
        window: deque[tuple[Document, Future[tuple[str, str | None, str | None]]]] = deque()
        executor = ThreadPoolExecutor(max_workers=max(1, self.o.concurrency))
        label = "checking" if self.o.dry_run else "backfill"
        progress = Progress(
            *columns, console=self.console, disable=not self.o.progress, transient=False
        )

        def stats() -> str:
            elapsed = time.monotonic() - started
            rate = s.items / elapsed if elapsed > 0 else 0.0
            return f"{s.documents} docs · {s.items} items · {rate:,.0f} items/s · {s.failed} failed"

        try:
            with progress:
                task = progress.add_task(label, total=size, stats="")
                for doc in documents:
                    if self.o.dry_run:
                        s.documents += 1
                        s.items += len(doc.items)
                    else:
                        self._wait_for_backlog(progress, task)
                        window.append((doc, executor.submit(self._post, doc)))
                        while window and (
                            len(window) >= 2 * self.o.concurrency or window[0][1].done()
                        ):
                            self._settle(*window.popleft(), checkpoint)
                    if time.monotonic() - saved_at > 1.0:
                        progress.update(
                            task, completed=doc.bytes_read, description=label, stats=stats()
                        )
                        if not self.o.dry_run:
                            checkpoint.seconds = prior_seconds + time.monotonic() - started
                            checkpoint.save(self.o.checkpoint)
                        saved_at = time.monotonic()
                while window:
                    self._settle(*window.popleft(), checkpoint)
                progress.update(task, completed=size, stats=stats())
            checkpoint.finished = True
        except KeyboardInterrupt:
            s.interrupted = True
            self.stop.set()
            executor.shutdown(wait=False, cancel_futures=True)
            self.console.print("[yellow]interrupted: finishing the requests in flight…[/]")
            while window and not window[0][1].cancelled():
                try:
                    self._settle(*window.popleft(), checkpoint)
                except (BackfillError, KeyboardInterrupt):
                    break
        finally:
            self.stop.set()
            executor.shutdown(wait=True, cancel_futures=True)
            s.seconds = time.monotonic() - started
            s.total_documents = checkpoint.documents
            if not self.o.dry_run:
                checkpoint.seconds = prior_seconds + s.seconds
                checkpoint.save(self.o.checkpoint)
        if self.o.wait and not s.interrupted:
            self.wait_searchable()
        return s

    def wait_searchable(self, poll: float = 0.5) -> None:
        """Until every operation this run started is terminal (completed: searchable)."""
        started = time.monotonic()
        total = len(self.pending_operations)
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.o.progress,
        )
        try:
            with progress:
                task = progress.add_task("processing", total=max(total, 1))
                while self.pending_operations:
                    op_id = self.pending_operations[0]
                    try:
                        r = self.client.get(f"/api/operations/{op_id}")
                        status = r.json().get("status") if r.status_code == 200 else None
                    except httpx.HTTPError:
                        status = None
                    if status in TERMINAL:
                        self.pending_operations.popleft()
                        self.summary.failed_operations += status == "failed"
                        progress.update(task, completed=total - len(self.pending_operations))
                    else:
                        time.sleep(poll)
        except KeyboardInterrupt:
            self.summary.interrupted = True
            return
        self.summary.searchable_seconds = time.monotonic() - started


def print_summary(console: Console, summary: Summary, checkpoint: Path) -> None:
    from rich.table import Table

    if summary.already_complete:
        console.print(
            f"[green]already complete[/]: {summary.total_documents} documents were posted "
            f"(checkpoint {checkpoint}; --restart posts everything again, idempotently)"
        )
        return
    table = Table(title="backfill summary", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())) or "-"
    rows: list[tuple[str, str]] = [
        ("documents posted", f"{summary.documents:,}"),
        ("items (messages)", f"{summary.items:,}"),
        ("outcomes", outcomes),
        ("failed documents", f"{summary.failed:,}"),
        ("skipped messages", f"{summary.skipped_items:,}"),
        ("elapsed", f"{summary.seconds:,.1f} s"),
        ("throughput", f"{summary.items_per_second:,.1f} items/s"),
        ("backpressure", summary.backpressure),
    ]
    if summary.retry_after_waits:
        rows.append(
            (
                "Retry-After honoured",
                f"{summary.retry_after_waits:,} × ({summary.retry_after_seconds:,.0f} s)",
            )
        )
    if summary.resumed_at:
        rows.append(("resumed after", f"{summary.resumed_at:,} documents"))
    if summary.searchable_seconds is not None:
        rows.append(("searchable after", f"{summary.searchable_seconds:,.1f} s more"))
        rows.append(("failed operations", f"{summary.failed_operations:,}"))
    if summary.failures_log:
        rows.append(("failures log", summary.failures_log))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if summary.backpressure.startswith("off"):
        console.print(f"[bold yellow]warning[/]: backpressure was {summary.backpressure}")
    if summary.interrupted:
        console.print(f"[yellow]interrupted[/]: run the same command to resume ({checkpoint})")


def connect(api_url: str, timeout: float, api_key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    return httpx.Client(base_url=api_url, timeout=timeout, headers=headers)
