"""Backpressure: a backfill pauses while its queues hold more than `--max-backlog` messages,
read from the API's /metrics; when they cannot be read, it says so loudly and posts on."""

from __future__ import annotations

import logging
import threading
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families
from rich.progress import Progress, TaskID

from memora.basics.stages import INGEST_STAGES, queue_for
from services.cli.backfill.options import BackfillOptions
from services.cli.backfill.summary import Summary

log = logging.getLogger("memora.backfill")
CHECK_EVERY = 2.0  # seconds between two reads of the depths, and between two while paused


class Backpressure:
    """The depths of one priority's backfill queues, and the pause they call for."""

    def __init__(
        self,
        client: httpx.Client,
        options: BackfillOptions,
        summary: Summary,
        stop: threading.Event,
    ) -> None:
        self.client = client
        self.max_backlog = options.max_backlog
        self.summary = summary
        self.stop = stop
        self.enabled = options.max_backlog > 0 and not options.dry_run
        self.problem = ""  # why the depths could not be read, the last time they could not
        self.checked = 0.0
        self.queues = {queue_for(s, backfill=options.priority == "backfill") for s in INGEST_STAGES}
        if options.max_backlog <= 0:
            summary.backpressure = "disabled (--max-backlog 0)"

    def backlog(self) -> int | None:
        """Messages waiting on the backfill queues, from the API's /metrics; None when they
        cannot be read (the reason is left in `problem`)."""
        try:
            r = self.client.get("/metrics")
        except httpx.HTTPError as exc:
            self.problem = f"GET /metrics failed: {type(exc).__name__}: {exc}"
            return None
        if r.status_code != 200:
            self.problem = f"GET /metrics answered HTTP {r.status_code}"
            return None
        depths = [
            s.value
            for family in text_string_to_metric_families(r.text)
            if family.name == "memora_queue_depth"
            for s in family.samples
            if s.labels.get("queue") in self.queues
        ]
        if not depths:
            self.problem = (
                "the API's /metrics has no memora_queue_depth for the backfill queues "
                "(an API without a broker, or one that cannot reach it)"
            )
            return None
        return int(sum(depths))

    def pause_while_full(self, progress: Progress, task: TaskID) -> None:
        """At most every CHECK_EVERY seconds: wait while the queues hold too many messages."""
        if not self.enabled or time.monotonic() - self.checked < CHECK_EVERY:
            return
        self.checked = time.monotonic()
        while not self.stop.is_set():
            depth = self.backlog()
            if depth is None:
                self._lost(progress)
                return
            if self.summary.backpressure != "on":
                progress.console.print("[green]queue depths readable again: backpressure on[/]")
                self.summary.backpressure = "on"
            if depth <= self.max_backlog:
                return
            progress.update(task, description=f"paused: {depth} messages queued")
            time.sleep(CHECK_EVERY)

    def _lost(self, progress: Progress) -> None:
        """Loudly: posting goes on without pausing, which may flood the backfill queues."""
        problem = f"off: {self.problem}"
        if self.summary.backpressure != problem:
            progress.console.print(
                f"[bold yellow]warning: cannot read the backfill queue depths[/] "
                f"({self.problem}); posting WITHOUT backpressure (--max-backlog "
                f"{self.max_backlog} is not enforced) until they can be read again"
            )
            log.warning("backfill backpressure off: %s", self.problem)
        self.summary.backpressure = problem
