"""What the stack benchmarks share: the embedded stack on free ports, and latencies read from
the operations' own timestamps (bench/ingest.py, bench/append.py)."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from memora_client import MemoraClient, MemoraError
from services.cli.stack import Stack


@dataclass(frozen=True)
class BenchStack:
    url: str  # the write API's
    data_dir: Path
    database_url: str = ""
    query_url: str = ""  # the query service's, when the stack has one
    read_database_url: str = ""  # its streaming replica's, when it has one
    broker_url: str = ""  # its Redis

    def cpu_seconds(self) -> float:
        """CPU time used so far by the stack: this process's children (API, query service,
        workers, Redis) and the embedded PostgreSQL (its own daemon), exited children included.
        Other work on the machine does not count, so its differences compare phases even on a
        shared machine."""
        return sum(self.cpu_by_part().values())

    def cpu_by_part(self) -> dict[str, float]:
        """`cpu_seconds` by part of the stack: `postgres`, `redis`, `beat`, each worker by its
        name (`extract`, `embed`...), `query`, `api`."""
        procs = {p.pid: p for p in psutil.Process().children(recursive=True)}
        for p in psutil.process_iter(["cmdline"]):
            if p.pid not in procs and str(self.data_dir) in " ".join(p.info["cmdline"] or []):
                with contextlib.suppress(psutil.Error):
                    procs.update({c.pid: c for c in [p, *p.children(recursive=True)]})
        parts: dict[str, float] = {}
        for proc in procs.values():
            with contextlib.suppress(psutil.Error):
                t = proc.cpu_times()
                part = _part(proc.cmdline(), proc.name())
                parts[part] = parts.get(part, 0.0) + (
                    t.user + t.system + t.children_user + t.children_system
                )
        return parts


def _part(cmdline: list[str], name: str) -> str:
    """The part of the stack a process belongs to, by its command line."""
    line = " ".join(cmdline)
    if "postgres" in name or "postgres" in line.split(" ")[0]:
        return "postgres"
    if "redis" in name:
        return "redis"
    if " beat" in line:
        return "beat"
    if "-n" in cmdline:  # a Celery worker: -n <name>-<pid>@host
        return cmdline[cmdline.index("-n") + 1].split("-")[0]
    return "query" if "query" in line else "api"


# pg_stat_statements loaded, with planning time: per-statement figures after a run
STATEMENT_OPTIONS = (
    "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top "
    "-c pg_stat_statements.track_planning=on"
)


@contextmanager
def embedded_stack(
    *,
    with_query: bool = False,
    env: Mapping[str, str] | None = None,
    statements: bool = False,
    read_replicas: int = 0,
) -> Iterator[BenchStack]:
    """The whole stack on the single-machine default (embedded PostgreSQL and Redis, the write
    API, one Celery worker per stage, beat; the query service if asked), its data and logs in a
    new temporary folder; yields it once every service is ready. `statements`: PostgreSQL
    counts every statement (pg_stat_statements, created in the database); `read_replicas` 1:
    the query service reads a streaming standby."""
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="memora-bench-")),
        port=free_port(),
        query_port=free_port(),
        read_replicas=read_replicas,
    )
    with Stack(
        settings,
        log_dir=settings.data_dir / "logs",
        with_query=with_query,
        extra_env=dict(env or {}),
        pg_options=STATEMENT_OPTIONS if statements else "",
    ) as stack:
        stack.wait_ready()
        url = settings.require_database_url()
        if statements:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        yield BenchStack(
            f"http://{settings.host}:{settings.port}",
            settings.data_dir,
            url,
            f"http://{settings.host}:{settings.query_port}",
            settings.read_database_url or "",
            stack.settings.broker,
        )


def seconds_after_post(
    ops: Sequence[dict[str, Any]], posts: Sequence[tuple[str, float]], stage: str | None = None
) -> list[float]:
    """Per POST (`posts`: operation id, epoch seconds of the POST; coalesced appends share an
    operation), the seconds until its operation (GET /api/operations/{id} bodies) finished
    `stage` (`links`: its memories are searchable by every retriever), or, with no stage, until
    the operation finished (conversation index included). POSTs whose operation has no such
    time are left out."""
    by_id = {op["id"]: op for op in ops}
    out = []
    for op_id, sent in posts:
        if (op := by_id.get(op_id)) is None:
            continue
        at = op["stages"].get(stage, {}).get("finished_at") if stage else op["finished_at"]
        if at:
            out.append(datetime.fromisoformat(at).timestamp() - sent)
    return out


def api_client(base: str, timeout: float = 120.0) -> MemoraClient:
    """A memora_client of `base` for a benchmark: without retries, so that a refusal is seen as
    it is and a timed request is one request."""
    return MemoraClient(base, timeout=timeout, max_retries=0)


def wait_ready(base: str, timeout: float = 180.0, path: str = "/health/ready") -> None:
    """Until `base` answers `path` without an error."""
    deadline = time.monotonic() + timeout
    with api_client(base, timeout=5) as memora:
        while time.monotonic() < deadline:
            with contextlib.suppress(MemoraError):
                memora.request("GET", path)
                return
            time.sleep(0.5)
    raise TimeoutError(f"{base} not ready after {timeout:.0f}s")


def timed_call(call: Callable[[], Any]) -> tuple[Any, float]:
    """What `call` returns and the ms it took."""
    started = time.perf_counter()
    found = call()
    return found, (time.perf_counter() - started) * 1000


def analyze_accesses(url: str, wait: float = 5.0) -> None:
    """`memory_access` analysed once the warm-up's accesses are in it (a query service writes
    them every second). Emptied and analysed by `settle`, it has no statistics of `tenant_id`
    then, and under row-level security PostgreSQL expects 0.5 % of its rows to pass: hydration
    compared each of its 100 candidates with every access row until autovacuum analysed the
    table, which came within a run's first minute or not at all; a freshly loaded one has none
    either. A database in use has its statistics; a new one's first minute without them is not
    measured here (its cost: docs/benchmarks-history.md, thirteenth and eighteenth rounds)."""
    deadline = time.monotonic() + wait
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute("SELECT 1 FROM memory_access LIMIT 1").fetchone():
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        conn.execute("ANALYZE memory_access")
