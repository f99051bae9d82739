"""The whole stack as child processes: embedded servers (when no URLs are given), the write API,
the query service, one Celery worker per stage queue, and beat. Stops everything it started."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memora.basics.config import Settings
from memora.basics.stages import (
    INGEST_STAGES,
    MAINTENANCE_QUEUE,
    WEBHOOKS_QUEUE,
    Stage,
    live_queues,
    queue_for,
)
from memora.db.migrate import upgrade
from memora.infra.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from services.workers.probe import check_heartbeat
from services.workers.queues import pool_options

log = logging.getLogger("memora.stack")


class Cancelled(Exception):
    """The stack was asked to stop (`Stack.cancel`) while it was starting."""


class DataDirInUse(RuntimeError):
    """Another stack runs embedded servers on this data folder."""


# Worker name -> queues it consumes. Live queues first: a worker prefers them over backfill.
WORKER_QUEUES: dict[str, list[str]] = {
    **{s.value: [queue_for(s), queue_for(s, backfill=True)] for s in INGEST_STAGES},
    "opinions": [Stage.OPINIONS.value, MAINTENANCE_QUEUE],
    "webhooks": [WEBHOOKS_QUEUE],
}


@dataclass
class Stack:
    settings: Settings
    workers: dict[str, list[str]] = field(default_factory=lambda: dict(WORKER_QUEUES))
    with_api: bool = True
    with_query: bool = True
    with_beat: bool = True
    log_dir: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    pg_options: str = ""  # more server options of the embedded PostgreSQL (benchmarks)
    postgres: EmbeddedPostgres | None = None
    replica: EmbeddedPostgres | None = None  # its streaming standby (MEMORA_READ_REPLICAS)
    redis: EmbeddedRedis | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Worker name -> port of its /metrics server (docs/operations.md).
    metrics_ports: dict[str, int] = field(default_factory=dict)
    revived: list[str] = field(default_factory=list)  # workers started again after exiting
    # Told each component's name as it becomes ready (`memora serve` prints them).
    progress: Callable[[str], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)  # set: stop starting
    _data_lock: int | None = None  # the data folder's lock, held while embedded servers run
    _stopping: threading.Event = field(default_factory=threading.Event)
    # Held briefly: `memora serve`'s signal thread may abort while the main thread revives.
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ lifecycle
    def _step(self, ready: str | None = None) -> None:
        """Between two steps of the start: say what is ready; stop when cancelled."""
        if ready and self.progress:
            self.progress(ready)
        if self.cancel.is_set():
            raise Cancelled("stopped while starting")

    def _lock_data_dir(self) -> None:
        """One stack at a time runs embedded servers on a data folder: a second one would stop
        the first one's PostgreSQL (the stale-server cleanup) or share its Redis."""
        data = self.settings.data_dir
        data.mkdir(parents=True, exist_ok=True)
        fd = os.open(data / "stack.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirInUse(
                f"the data folder {data} is in use by another stack: set another with "
                "MEMORA_DATA_DIR or --data-dir"
            ) from None
        self._data_lock = fd

    def _unlock_data_dir(self) -> None:
        if self._data_lock is not None:
            os.close(self._data_lock)  # closing releases the lock
            self._data_lock = None

    def start_infrastructure(self) -> None:
        data = self.settings.data_dir
        if not (self.settings.database_url and self.settings.broker_url):
            self._lock_data_dir()
        if not self.settings.database_url:
            # with a replica, commits (asynchronous here) reach it within 10 ms, not 200
            streamed = " -c wal_writer_delay=10ms" if self.settings.read_replicas else ""
            self.postgres = EmbeddedPostgres(
                data,
                shared_buffers=self.settings.embedded_pg_shared_buffers,
                options=self.pg_options + streamed,
            )
            self.settings.database_url = self.postgres.start()
            log.info("embedded PostgreSQL at %s", self.settings.database_url)
            self._step(f"PostgreSQL (embedded, port {self.postgres.port})")
            if self.settings.read_replicas:
                self.start_replica()
        if not self.settings.broker_url:
            self.redis = EmbeddedRedis(data / "redis")
            self.settings.broker_url = self.redis.start()
            log.info("private Redis at %s", self.settings.broker_url)
            self._step(f"Redis (private, port {self.redis.port})")
        s = self.settings
        upgrade(s.require_database_url(), s.embedding_dim, settings=s)
        self._step("schema")

    def start_replica(self) -> None:
        """A streaming standby of the embedded PostgreSQL, which the query service reads
        (MEMORA_READ_REPLICAS=1: the production shape, on one machine)."""
        assert self.postgres is not None
        self.replica = EmbeddedPostgres(
            self.settings.data_dir / "replica",
            shared_buffers=self.settings.embedded_pg_shared_buffers,
            options=self.pg_options,
        )
        self.settings.read_database_url = self.replica.start_standby(self.postgres)
        log.info("embedded PostgreSQL standby at %s", self.settings.read_database_url)
        self._step(f"PostgreSQL read replica (streaming standby, port {self.replica.port})")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            MEMORA_DATABASE_URL=self.settings.require_database_url(),
            MEMORA_BROKER_URL=self.settings.broker_url or "",
            MEMORA_DATA_DIR=str(self.settings.data_dir),
            MEMORA_PORT=str(self.settings.port),
            MEMORA_QUERY_PORT=str(self.settings.query_port),
            MEMORA_STAGE_BATCH_SIZE=str(self.settings.stage_batch_size),  # as pool_options saw it
            HF_HUB_OFFLINE="1",
            TOKENIZERS_PARALLELISM="false",
        )
        if self.settings.read_database_url:
            env["MEMORA_READ_DATABASE_URL"] = self.settings.read_database_url
        env.update(self.extra_env)
        if self.with_query:
            env.setdefault(
                "MEMORA_QUERY_URL", f"http://{self.settings.host}:{self.settings.query_port}"
            )
        return env

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        out = None
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives with the child
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", *args],
            env=self.env() | (env or {}),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,  # Ctrl-C reaches us only; we stop the children in order
        )

    def start_worker(self, name: str) -> None:
        queues = self.workers[name]
        self._spawn(
            f"worker-{name}",
            [
                "celery",
                "-A",
                "services.workers.tasks",
                "worker",
                "-Q",
                ",".join(queues),
                "-n",
                f"{name}-{os.getpid()}@%h",
                *pool_options(self.settings, queues, self.settings.worker_concurrency),
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
            ],
            env=self.worker_ops_env(name),
        )

    def api_env(self) -> dict[str, str]:
        """The write API is ready once what it hands work to answers: the query service and a
        worker (its models loaded) on each stage queue this stack consumes."""
        consumed = {q for queues in self.workers.values() for q in queues}
        env = {
            "MEMORA_READY_SCOPE": "stack",
            "MEMORA_READY_QUEUES": ",".join(q for q in live_queues() if q in consumed),
        }
        return {k: v for k, v in env.items() if k not in self.extra_env}

    def worker_ops_env(self, name: str) -> dict[str, str]:
        """A worker's metrics port, multiprocess metrics directory and heartbeat file."""
        data = self.settings.data_dir
        (data / "metrics" / name).mkdir(parents=True, exist_ok=True)
        self._heartbeat_file(name).unlink(missing_ok=True)  # a previous run's
        return {
            "PROMETHEUS_MULTIPROC_DIR": str(data / "metrics" / name),
            "MEMORA_WORKER_METRICS_PORT": str(self.metrics_ports.setdefault(name, free_port())),
            "MEMORA_WORKER_HEARTBEAT_FILE": str(self._heartbeat_file(name)),
        }

    def start(self) -> None:
        self.start_infrastructure()
        s = self.settings
        for name in self.workers:
            self._step()
            self.start_worker(name)
        if self.with_beat:
            self._spawn(
                "beat",
                [
                    "celery",
                    "-A",
                    "services.workers.tasks",
                    "beat",
                    "--loglevel",
                    "INFO",
                    "-s",
                    str(s.data_dir / "celerybeat-schedule"),
                ],
            )
        if self.with_query:
            self._spawn(
                "query", _uvicorn("services.api.query_app:create_app", s.host, s.query_port)
            )
        if self.with_api:
            self._spawn(
                "api", _uvicorn("services.api.app:create_app", s.host, s.port), self.api_env()
            )

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Until every HTTP service answers /health/ready with 200: with the write API, until
        the query service and the workers answer too (api_env). Each worker is reported ready
        by its heartbeat file (its models loaded, its consumer started), the API last."""
        pending: dict[str, Callable[[], bool]] = {}
        if self.with_query:
            pending["query service"] = self._answers(self.settings.query_port)
        for name in self.workers:
            pending[f"worker {name}"] = self._beats(name)
        if self.with_api:
            pending["API"] = self._answers(self.settings.port)
        deadline = time.monotonic() + timeout
        while pending:
            self.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"not ready after {timeout:.0f}s: {', '.join(pending)}")
            for name, ready in list(pending.items()):
                # the API answers once all the others do: asked last
                if (name != "API" or len(pending) == 1) and ready():
                    del pending[name]
                    self._step(name)
            if pending and self.cancel.wait(0.5):
                raise Cancelled("stopped while starting")

    def _heartbeat_file(self, worker: str) -> Path:
        return self.settings.data_dir / "heartbeats" / f"{worker}.heartbeat"

    def _beats(self, worker: str) -> Callable[[], bool]:
        path = self._heartbeat_file(worker)
        return lambda: check_heartbeat(path)[0]

    def _answers(self, port: int) -> Callable[[], bool]:
        url = f"http://{self.settings.host}:{port}/health/ready"

        def check() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(url, timeout=2).status_code == 200
            return False

        return check

    def revive_workers(self) -> list[str]:
        """Start again every worker whose process exited, as an orchestrator restarts a pod:
        Celery's worker can give up on a broker connection it lost (kombu, restoring its
        unacknowledged messages over a closed connection) and exit. Their names."""
        revived = []
        with self._lock:
            for name, proc in list(self.processes.items()):
                if self._stopping.is_set() or not name.startswith("worker-"):
                    continue
                if proc.poll() is not None:
                    log.warning("%s exited with code %s; starting it again", name, proc.returncode)
                    self.start_worker(name.removeprefix("worker-"))
                    revived.append(name)
        self.revived += revived
        return revived

    def supervise(self, interval: float = 1.0) -> None:
        """Revive exited workers every `interval` seconds until the stack stops."""

        def loop() -> None:
            while not self._stopping.wait(interval):
                self.revive_workers()

        threading.Thread(target=loop, name="stack-supervisor", daemon=True).start()

    def check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {proc.returncode}")

    def stop_process(self, name: str, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        proc = self.processes.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """The API, the query service and beat first, then the workers, each given `timeout`
        seconds after SIGTERM before SIGKILL; then Redis and PostgreSQL."""
        with self._lock:
            self._stopping.set()
        front = [n for n in ("api", "query", "beat") if n in self.processes]
        for name in front + [n for n in self.processes if n not in front]:
            self.stop_process(name, timeout=timeout)
        self._stop_servers()

    def abort(self, grace: float = 5.0) -> None:
        """Stop a stack that is not ready: SIGTERM to every process at once, SIGKILL to those
        still running `grace` seconds later (grace 0: at once); then Redis and PostgreSQL."""
        with self._lock:
            self._stopping.set()
            processes = list(self.processes.values())
        if grace > 0:
            _signal_all(processes, signal.SIGTERM, wait=grace)
        _signal_all(processes, signal.SIGKILL, wait=10.0)
        self.processes.clear()
        self._stop_servers()

    def _stop_servers(self) -> None:
        if self.redis:
            self.redis.stop()
        if self.replica:
            self.replica.stop(quiet=True)
        if self.postgres:
            self.postgres.stop(quiet=True)
        self._unlock_data_dir()

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_all(processes: list[subprocess.Popen[bytes]], sig: int, *, wait: float) -> None:
    """`sig` to the process group of each process still running; then up to `wait` seconds
    for them all to exit."""
    for proc in processes:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
    deadline = time.monotonic() + wait
    for proc in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))


def _uvicorn(factory: str, host: str, port: int) -> list[str]:
    """The arguments of `python -m` serving an app factory with uvicorn."""
    return [
        "uvicorn",
        factory,
        "--factory",
        "--host",
        host,
        "--port",
        str(port),
        "--log-level",
        "warning",
        # longer than any Retry-After the API sends (5 s), so that a client retrying after one
        # finds its connection still open (uvicorn's default closes it after 5 s idle)
        "--timeout-keep-alive",
        "30",
    ]
