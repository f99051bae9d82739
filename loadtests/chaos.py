"""Faults injected into the embedded stack while the load runs (the `chaos` scenario).

A schedule spreads rounds of three faults over the run: a pipeline worker SIGKILLed (its whole
process group, as the kernel's OOM killer would) and started again after a delay, as an
orchestrator would; Redis stopped and started again on the same port and data (AOF);
PostgreSQL stopped (fast shutdown: sessions are cut) and started again.

After each fault a probe measures recovery, from the moment of the fault:
- `write_s` / `search_s`: until a POST of a one-item batch / a search answers 200;
- `pipeline_s`: until a batch first accepted after the component came back is processed
  end to end (its operation `completed`): the system is healthy again;
- `backlog_s` (from the database once the run is over): until the last operation that was
  queued or running during the fault finished, those the reconciler re-enqueued included.

The probes' batches go to agent `lt-<run>-probe` and are verified like every other batch.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from loadtests.corpus import turn
from memora_client import MemoraClient, MemoraError
from services.cli.stack import Stack

WORKER_ROTATION = ("embed", "extract", "links", "entities")
# The reconciler horizon of the chaos stack (production: 300 s and 60 s, docs/operations.md):
# work lost with Redis or a killed worker is re-enqueued within the run, not after it.
STACK_ENV = {
    "MEMORA_STUCK_AFTER_SECONDS": "60",
    "MEMORA_RECONCILE_INTERVAL_SECONDS": "10",
    "MEMORA_VISIBILITY_TIMEOUT": "300",
}


@dataclass
class Fault:
    kind: str  # worker_kill, redis_restart, postgres_restart
    target: str
    at: float  # seconds into the load
    injected_at: float = 0.0  # epoch seconds
    restored_at: float = 0.0
    recovery: dict[str, float | None] = field(default_factory=dict)
    probe_operations: list[str] = field(default_factory=list)
    probe_items: int = 0

    def report(self) -> dict[str, Any]:
        data = asdict(self)
        data["down_seconds"] = round(self.restored_at - self.injected_at, 1)
        data["injected_at"] = datetime.fromtimestamp(self.injected_at, UTC).isoformat()
        data["restored_at"] = datetime.fromtimestamp(self.restored_at, UTC).isoformat()
        return data


def schedule(run_seconds: float, rounds: int) -> list[Fault]:
    """`rounds` × (worker kill, Redis restart, PostgreSQL restart), evenly over the run, the
    first after 10 % of it and the last leaving a quarter to recover under load."""
    kinds = ("worker_kill", "redis_restart", "postgres_restart")
    slots = rounds * len(kinds)
    start, span = 0.1 * run_seconds, 0.65 * run_seconds
    faults = []
    for n in range(slots):
        kind = kinds[n % len(kinds)]
        target = {
            "worker_kill": WORKER_ROTATION[(n // len(kinds)) % len(WORKER_ROTATION)],
            "redis_restart": "redis",
            "postgres_restart": "postgresql",
        }[kind]
        faults.append(Fault(kind, target, round(start + span * n / max(slots - 1, 1), 1)))
    return faults


class ChaosMonkey(threading.Thread):
    """Runs the schedule against `stack`, from `begin()` (when the load starts)."""

    def __init__(
        self,
        stack: Stack,
        host: str,
        db_url: str,
        run_id: str,
        faults: list[Fault],
        *,
        postgres_down: float,
        redis_down: float,
        worker_restart_delay: float,
    ) -> None:
        super().__init__(name="chaos", daemon=True)
        self.stack, self.host, self.db_url, self.run_id = stack, host, db_url, run_id
        self.faults = faults
        self.postgres_down, self.redis_down = postgres_down, redis_down
        self.worker_restart_delay = worker_restart_delay
        self.stopping = threading.Event()  # abandon the probe in progress
        self.no_more_faults = threading.Event()
        self.errors: list[str] = []
        self._t0 = 0.0

    def begin(self) -> None:
        self._t0 = time.monotonic()
        self.start()

    def run(self) -> None:
        for fault in self.faults:
            if self.no_more_faults.wait(max(0.0, self._t0 + fault.at - time.monotonic())):
                return
            # The probe runs from the moment of the fault, beside the fault's own steps.
            probe = threading.Thread(target=self._probe_reporting, args=(fault,), daemon=True)
            try:
                fault.injected_at = time.time()
                probe.start()
                self.inject(fault)
            except Exception as exc:  # reported, never silently dropped
                self.errors.append(f"{fault.kind} at {fault.at}s: {exc!r}")
                fault.restored_at = fault.restored_at or time.time()
            probe.join()
            print(f"chaos: {fault.kind} {fault.target}: recovery {fault.recovery}", flush=True)

    def _probe_reporting(self, fault: Fault) -> None:
        try:
            self.probe(fault)
        except Exception as exc:
            self.errors.append(f"probe of {fault.kind} at {fault.at}s: {exc!r}")

    # ------------------------------------------------------------------ faults
    def inject(self, fault: Fault) -> None:
        print(f"chaos: {fault.kind} {fault.target} at {fault.at}s", flush=True)
        if fault.kind == "worker_kill":
            name = f"worker-{fault.target}"
            proc = self.stack.processes.pop(name)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            time.sleep(self.worker_restart_delay)
            self.stack.start_worker(fault.target)
        elif fault.kind == "redis_restart":
            assert self.stack.redis is not None, "the chaos scenario needs the embedded Redis"
            self.stack.redis.stop()
            time.sleep(self.redis_down)
            self.stack.redis.start()
        else:
            assert self.stack.postgres is not None, "the chaos scenario needs embedded PostgreSQL"
            self.stack.postgres.stop()
            time.sleep(self.postgres_down)
            self.stack.postgres.start()
        fault.restored_at = time.time()

    # ------------------------------------------------------------------ recovery
    def probe(self, fault: Fault, timeout: float = 600.0) -> None:
        """Writes and searches every half second from the fault on, until a batch accepted
        after the restore is processed. `write_s` / `search_s`: until the first 200 that
        follows the last failed attempt (0 when none failed: the API never stopped)."""
        agent = f"lt-{self.run_id}-probe"
        outage = {"write": _Outage(), "search": _Outage()}
        pipeline_s = None
        pending: str | None = None
        body: dict[str, Any] | None = None
        deadline = time.monotonic() + timeout
        with MemoraClient(self.host, timeout=30, max_retries=0) as client:
            while pipeline_s is None and time.monotonic() < deadline and not self.stopping.is_set():
                if pending is None:
                    if body is None:  # a failed post is retried with the same document
                        body = {
                            "agent_id": agent,
                            "document_id": f"probe-{uuid.uuid4().hex[:12]}",
                            "items": [{"content": f"Probe: {turn()}"}],
                        }
                        sent_at = time.time()
                    answer = _post(client, "/api/memories/batch", body)
                    outage["write"].saw(answer is not None)
                    if answer is not None:
                        fault.probe_operations.append(answer["operation_id"])
                        fault.probe_items += 1
                        if fault.restored_at and sent_at >= fault.restored_at:
                            pending = answer["operation_id"]
                        body = None
                found = _post(client, "/api/search", {"agent_id": agent, "query": "probe"})
                outage["search"].saw(found is not None)
                if pending is not None and self._completed(pending):
                    pipeline_s = time.time() - fault.injected_at
                time.sleep(0.5)
        fault.recovery = {
            "write_s": outage["write"].seconds(fault.injected_at),
            "search_s": outage["search"].seconds(fault.injected_at),
            "pipeline_s": _round(pipeline_s),
        }

    def _completed(self, operation_id: str) -> bool:
        try:
            with psycopg.connect(self.db_url, autocommit=True, connect_timeout=5) as conn:
                row = conn.execute(
                    "SELECT status FROM operations WHERE id = %s", (operation_id,)
                ).fetchone()
        except psycopg.Error:
            return False
        return row is not None and row[0] == "completed"

    def finish(self, timeout: float = 600.0) -> None:
        """No further faults; waits (bounded) for the fault in progress to recover."""
        self.no_more_faults.set()
        self.join(timeout)
        if self.is_alive():
            self.stopping.set()
            self.errors.append(f"recovery of the last fault not seen within {timeout:.0f}s")
            self.join(60)


def backlog_recovery(db_url: str, prefix: str, faults: list[Fault]) -> None:
    """Per fault, seconds from the fault until the last operation of the run that was queued
    or running at some point during it finished (read once the pipeline has drained)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        for fault in faults:
            if not fault.injected_at:
                continue
            row = conn.execute(
                "SELECT max(finished_at) FROM operations WHERE agent_id LIKE %s "
                "AND created_at <= to_timestamp(%s) AND finished_at >= to_timestamp(%s)",
                (prefix + "%", fault.restored_at, fault.injected_at),
            ).fetchone()
            last = row[0] if row else None
            fault.recovery["backlog_s"] = (
                round(last.timestamp() - fault.injected_at, 1) if last else None
            )


@dataclass
class _Outage:
    """Failed attempts of one kind of request during a probe."""

    failures: int = 0
    recovered_at: float | None = None  # the first success after the last failure

    def saw(self, ok: bool) -> None:
        if not ok:
            self.failures += 1
            self.recovered_at = None
        elif self.recovered_at is None:
            self.recovered_at = time.time()

    def seconds(self, since: float) -> float | None:
        if not self.failures:
            return 0.0
        return None if self.recovered_at is None else round(self.recovered_at - since, 1)


def _post(client: MemoraClient, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The answer, None when the request failed (no connection, an error status)."""
    try:
        answer: dict[str, Any] = client.request("POST", path, body)
    except MemoraError:
        return None
    return answer


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
