"""Ingest scale-out: sustained turns/s with 1, 2, 4, 8 worker processes per ingest stage, and
the evidence for what runs out first (issue 16, item 4).

    python bench/scaleout.py --locomo ../shared/locomo/locomo_dev.json --processes 1,2
    python bench/scaleout.py --locomo ../shared/locomo/locomo_dev.json --processes 1,2,4,8

For each N, a fresh stack in the deploy's shape: PostgreSQL and Redis as separate servers over
TCP, with the settings docker-compose.yml and deploy/k8s run them with (PostgreSQL's defaults:
synchronous_commit=on, shared_buffers 128MB; Redis with appendonly yes), the write API, and
N replicas of `memora worker --stage S` for every ingest stage S, each a separate Celery worker
with its own broker connection, as KEDA adds pods (`--concurrency` prefork children each; 1 by
default, so N replicas = N processes per stage; the k8s pods run 2). The load grows with N
(weak scaling): N × `--copies-per-process` copies of the corpus, one agent per copy, so every
agent holds the same data and a run lasts about as long at every N.

While the documents are processed, a sampler records every 0.5 s: CPU per role (psutil, each
process tree), PostgreSQL's active backends by wait event and its commit rate, Redis's
operations per second and PING round trip, and the depth of each stage's queue. The stage busy
time comes from the operations' per-stage start and end times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg
import redis

from memora_client import MemoraClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from ingest import Session, bare_embedding_rate, locomo_sessions, wait_done

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES, queue_for
from memora.infra.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from services.cli.stack import Stack

STAGES = [s.value for s in INGEST_STAGES]


@dataclass
class ReplicatedStack(Stack):
    """The stack with `replicas` separate workers per ingest stage, started like the k8s pods
    (`memora worker --stage S`); the opinions/maintenance worker stays single."""

    replicas: int = 1

    def start_worker(self, name: str) -> None:
        if name not in STAGES:
            super().start_worker(name)
            return
        for i in range(self.replicas):
            replica = f"{name}-{i}"
            self._spawn(
                f"worker-{replica}",
                ["services.cli.main", "worker", "--stage", name, "-n", f"{replica}@%h"],
                env=self.worker_ops_env(replica),
            )


@dataclass(eq=False)  # a Thread: hashed by identity
class Sampler(threading.Thread):
    """Samples CPU per role, PostgreSQL, Redis and queue depths until stopped."""

    roles: dict[str, list[int]]  # role -> root pids (each with its process tree)
    database_url: str
    broker_url: str
    every: float = 0.5
    stop_event: threading.Event = field(default_factory=threading.Event)
    cpu_first: dict[int, tuple[str, float]] = field(default_factory=dict)
    cpu_last: dict[int, float] = field(default_factory=dict)
    waits: Counter[str] = field(default_factory=Counter)
    lock_waiters: Counter[str] = field(default_factory=Counter)  # statements waiting
    active: list[int] = field(default_factory=list)
    redis_ops: list[int] = field(default_factory=list)
    ping_ms: list[float] = field(default_factory=list)
    depths: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    counters_start: dict[str, float] = field(default_factory=dict)
    counters_end: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(daemon=True)

    def counters(self, pg: psycopg.Connection[Any], r: redis.Redis) -> dict[str, float]:
        commits, rollbacks, wal, size = pg.execute(
            "SELECT xact_commit, xact_rollback, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'), "
            "pg_database_size(datname) FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone() or (0, 0, 0, 0)
        stats = r.info("stats")
        return {
            "t": time.monotonic(),
            "commits": float(commits),
            "rollbacks": float(rollbacks),
            "wal_bytes": float(wal),
            "database_bytes": float(size),
            "redis_commands": float(stats["total_commands_processed"]),
        }

    def sample_cpu(self) -> None:
        for role, roots in self.roles.items():
            for root in roots:
                with contextlib.suppress(psutil.Error):
                    top = psutil.Process(root)
                    for p in [top, *top.children(recursive=True)]:
                        with contextlib.suppress(psutil.Error):
                            t = p.cpu_times()
                            used = t.user + t.system
                            self.cpu_first.setdefault(p.pid, (role, used))
                            self.cpu_last[p.pid] = used

    def run(self) -> None:
        r = redis.Redis.from_url(self.broker_url)
        with psycopg.connect(self.database_url, autocommit=True) as pg:
            self.counters_start = self.counters(pg, r)
            while not self.stop_event.wait(self.every):
                self.sample_cpu()
                rows = pg.execute(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) "
                    "FROM pg_stat_activity WHERE state = 'active' "
                    "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                    "GROUP BY 1"
                ).fetchall()
                self.waits.update({event: n for event, n in rows})
                self.lock_waiters.update(
                    query
                    for (query,) in pg.execute(
                        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70) "
                        "FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    )
                )
                self.active.append(sum(n for _, n in rows))
                started = time.perf_counter()
                r.ping()
                self.ping_ms.append(1000 * (time.perf_counter() - started))
                self.redis_ops.append(int(r.info("stats")["instantaneous_ops_per_sec"]))
                with r.pipeline() as pipe:
                    for stage in INGEST_STAGES:
                        pipe.llen(queue_for(stage))
                    for stage, depth in zip(STAGES, pipe.execute(), strict=True):
                        self.depths[stage].append(int(depth))
            self.sample_cpu()
            self.counters_end = self.counters(pg, r)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()

    def cores_by_role(self, seconds: float) -> dict[str, float]:
        used: dict[str, float] = defaultdict(float)
        for pid, (role, first) in self.cpu_first.items():
            used[role] += self.cpu_last[pid] - first
        return {role: cpu / seconds for role, cpu in used.items()}


def pids_of(stack: Stack, pg: EmbeddedPostgres, rd: EmbeddedRedis) -> dict[str, list[int]]:
    roles: dict[str, list[int]] = defaultdict(list)
    for name, proc in stack.processes.items():
        # worker-embed-0, worker-embed-1 -> embed; worker-opinions, api, beat as they are
        role = name.removeprefix("worker-").rsplit("-", 1)[0] if name[-1].isdigit() else name
        roles[role].append(proc.pid)
    postmaster = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
    roles["postgres"] = [postmaster]
    roles["redis"] = [rd.process.pid] if rd.process else []
    return dict(roles)


def post_concurrently(
    client: MemoraClient, jobs: list[tuple[str, Session]], threads: int = 4
) -> list[tuple[str, float, int]]:
    """Posts (agent, session) pairs from a few threads, so that the API is not the limit."""
    posted: list[tuple[str, float, int]] = []
    lock = threading.Lock()
    queue = list(jobs)

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                agent, s = queue.pop(0)
            sent = time.time()
            accepted = client.store_batch(agent, s.items, s.document_id)
            with lock:
                posted.append((str(accepted.operation_id), sent, len(s.items)))

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return posted


def wait_heartbeats(stack: Stack, names: list[str], timeout: float = 300) -> None:
    files = [stack.settings.data_dir / "heartbeats" / f"{n}.heartbeat" for n in names]
    deadline = time.monotonic() + timeout
    while not all(f.exists() for f in files):
        stack.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"workers without a heartbeat: {[f for f in files if not f.exists()]}"
            )
        time.sleep(0.5)


def run_one(
    n: int, sessions: list[Session], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    data = work / f"n{n}"
    pg = EmbeddedPostgres(data / "pg", shared_buffers=args.pg_shared_buffers)
    rd = EmbeddedRedis(data / "redis")
    with contextlib.ExitStack() as servers:
        database_url = pg.start()
        servers.callback(pg.stop, quiet=True)
        with psycopg.connect(database_url, autocommit=True) as conn:
            # the embedded server runs with synchronous_commit=off; the deploy's servers do not
            conn.execute("ALTER DATABASE memora SET synchronous_commit = on")
        broker_url = rd.start()
        servers.callback(rd.stop)
        settings = Settings(
            data_dir=data,
            port=free_port(),
            query_port=free_port(),
            database_url=database_url,
            broker_url=broker_url,
            worker_concurrency=args.concurrency,
        )
        stack = ReplicatedStack(settings, log_dir=data / "logs", with_query=False, replicas=n)
        with stack:
            stack.wait_ready()
            wait_heartbeats(stack, [f"{s}-{i}" for s in STAGES for i in range(n)])
            base = f"http://{settings.host}:{settings.port}"
            with MemoraClient(base, timeout=120, max_retries=0) as client:
                warm = [(f"warm-{i}", s) for i, s in enumerate(sessions[: 2 * n])]
                wait_done(client, post_concurrently(client, warm))
                copies = n * args.copies_per_process
                agents = [f"scale{n}-{c}-{uuid.uuid4().hex[:6]}" for c in range(copies)]
                jobs = [(agent, s) for agent in agents for s in sessions]
                sampler = Sampler(pids_of(stack, pg, rd), database_url, broker_url)
                load_before = os.getloadavg()[0]
                sampler.start()
                t0 = time.perf_counter()
                posted = post_concurrently(client, jobs)
                post_seconds = time.perf_counter() - t0
                done = wait_done(client, posted)
                window = time.perf_counter() - t0
                sampler.stop()
                load_after = os.getloadavg()[0]
    turns = sum(k for _, _, k in posted)
    busy = {
        stage: sum(
            datetime.fromisoformat(d["stages"][stage]["finished_at"]).timestamp()
            - datetime.fromisoformat(d["stages"][stage]["started_at"]).timestamp()
            for d in done
            if stage in d["stages"]
        )
        for stage in STAGES
    }
    start, end = sampler.counters_start, sampler.counters_end
    elapsed = end["t"] - start["t"]
    active_samples = sum(sampler.waits.values()) or 1
    return {
        "processes_per_stage": n * args.concurrency,
        "replicas": n,
        "concurrency": args.concurrency,
        "turns": turns,
        "documents": len(posted),
        "failed": sum(1 for d in done if d["status"] != "completed") + len(posted) - len(done),
        "post_seconds": post_seconds,
        "window_seconds": window,
        "turns_per_s": turns / window,
        "load_before": load_before,
        "load_after": load_after,
        "cores": sampler.cores_by_role(elapsed),
        "stage_busy_share": {s: b / (window * n * args.concurrency) for s, b in busy.items()},
        "queue_depth_mean": {s: statistics.mean(v) for s, v in sampler.depths.items()},
        "queue_depth_max": {s: max(v) for s, v in sampler.depths.items()},
        "pg_commits_per_s": (end["commits"] - start["commits"]) / elapsed,
        "pg_rollbacks_per_s": (end["rollbacks"] - start["rollbacks"]) / elapsed,
        "pg_wal_mb_per_s": (end["wal_bytes"] - start["wal_bytes"]) / elapsed / 2**20,
        "database_mb_per_1000_turns": (end["database_bytes"] - start["database_bytes"])
        / 2**20
        / turns
        * 1000,
        "pg_active_mean": statistics.mean(sampler.active),
        "pg_wait_share": {
            event: count / active_samples for event, count in sampler.waits.most_common(5)
        },
        "pg_lock_wait_share": sum(c for e, c in sampler.waits.items() if e.startswith("Lock:"))
        / active_samples,
        "pg_lock_waiting_statements": sampler.lock_waiters.most_common(3),
        "redis_ops_per_s": (end["redis_commands"] - start["redis_commands"]) / elapsed,
        "redis_ops_per_s_peak": max(sampler.redis_ops),
        "redis_ping_ms_p50": statistics.median(sampler.ping_ms),
        "redis_ping_ms_max": max(sampler.ping_ms),
    }


def print_table(results: list[dict[str, Any]], bare: dict[int, float]) -> None:
    base = results[0]["turns_per_s"] / results[0]["processes_per_stage"]
    print(
        f"\nmachine: {os.cpu_count()} CPUs; bare embedding "
        + ", ".join(
            f"{rate:.0f} turns/s ({t} thread{'s' if t > 1 else ''})" for t, rate in bare.items()
        )
    )
    print(
        f"{'procs/stage':>11} {'turns':>6} {'window s':>8} {'turns/s':>8} {'× 1-proc':>8} "
        f"{'efficiency':>10} {'failed':>6} {'load1 before→after':>19}"
    )
    for r in results:
        speedup = r["turns_per_s"] / results[0]["turns_per_s"]
        eff = r["turns_per_s"] / (base * r["processes_per_stage"])
        print(
            f"{r['processes_per_stage']:>11} {r['turns']:>6} {r['window_seconds']:>8.1f} "
            f"{r['turns_per_s']:>8.1f} {speedup:>8.2f} {eff:>10.0%} {r['failed']:>6} "
            f"{r['load_before']:>9.1f} → {r['load_after']:<6.1f}"
        )
    for r in results:
        cores = r["cores"]
        print(
            f"\n[{r['processes_per_stage']} per stage] CPU, cores busy over the window "
            f"(total {sum(cores.values()):.2f} of {os.cpu_count()}):"
        )
        print(
            "  "
            + "  ".join(f"{k} {v:.2f}" for k, v in sorted(cores.items(), key=lambda kv: -kv[1]))
        )
        print(
            "  stage busy (share of its worker processes' time): "
            + "  ".join(f"{s} {v:.0%}" for s, v in r["stage_busy_share"].items())
        )
        print(
            "  queue depth mean/max: "
            + "  ".join(
                f"{s} {r['queue_depth_mean'][s]:.0f}/{r['queue_depth_max'][s]}" for s in STAGES
            )
        )
        print(
            f"  postgres: {r['pg_commits_per_s']:.0f} commits/s, "
            f"{r['pg_wal_mb_per_s']:.1f} MB/s of WAL, {r['pg_active_mean']:.1f} "
            f"active backends on average, lock waits {r['pg_lock_wait_share']:.0%} of active; "
            "by wait event: " + ", ".join(f"{e} {v:.0%}" for e, v in r["pg_wait_share"].items())
        )
        for statement, samples in r["pg_lock_waiting_statements"]:
            print(f"    waiting for a lock in {samples} samples: {statement}")
        print(
            f"  redis: {r['redis_ops_per_s']:.0f} commands/s (peak {r['redis_ops_per_s_peak']}), "
            f"PING p50 {r['redis_ping_ms_p50']:.2f} ms, max {r['redis_ping_ms_max']:.1f} ms"
        )
        per_k = 1000 / r["turns_per_s"]  # seconds of the window per 1000 turns
        print(
            "  per 1000 turns: CPU s "
            + "  ".join(f"{k} {v * per_k:.1f}" for k, v in cores.items() if v * per_k >= 0.05)
            + f"; {r['pg_commits_per_s'] * per_k:.0f} commits, "
            f"{r['pg_wal_mb_per_s'] * per_k:.0f} MB of WAL, "
            f"{r['database_mb_per_1000_turns']:.0f} MB more database; "
            f"{r['redis_ops_per_s'] * per_k:.0f} Redis commands"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo JSON (dev split)")
    parser.add_argument("--processes", default="1,2", help="replicas per stage, e.g. 1,2,4,8")
    parser.add_argument("--concurrency", type=int, default=1, help="prefork children per replica")
    parser.add_argument("--copies-per-process", type=int, default=2, help="corpus copies per N")
    parser.add_argument("--pg-shared-buffers", default="128MB", help="the pgvector image's default")
    parser.add_argument("--out", type=Path, default=Path("bench/results/scaleout.json"))
    args = parser.parse_args()
    sessions = locomo_sessions(args.locomo)
    counts = [int(x) for x in args.processes.split(",")]
    texts = [f"{i['speaker']}: {i['content']}" for s in sessions for i in s.items]
    bare = {
        t: bare_embedding_rate(texts, t)
        for t in sorted({1, 2, min(max(counts), os.cpu_count() or 1)})
    }
    work = Path(tempfile.mkdtemp(prefix="memora-scaleout-"))
    results = []
    for n in counts:
        results.append(run_one(n, sessions, args, work))
        print(f"N={n}: {results[-1]['turns_per_s']:.1f} turns/s", flush=True)
    shutil.rmtree(work)  # kept, with the servers' and workers' logs, when a run fails
    print_table(results, bare)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "when": datetime.now(UTC).isoformat(),
                "cpus": os.cpu_count(),
                "bare_embedding": bare,
                "runs": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
