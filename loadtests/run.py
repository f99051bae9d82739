"""Headless load test of Memora: starts the embedded stack (or uses a running one on this
machine), seeds data, runs a locust scenario, waits for the pipeline to drain, then checks that
nothing was lost and reports throughput, latency and pipeline lag.

    python -m loadtests.run --scenario mixed --users 8 --run-time 60s
    python -m loadtests.run --scenario chaos --users 8 --run-time 15m
    python -m loadtests.run --scenario chat --host http://127.0.0.1:8080 \\
        --database-url postgresql://postgres@127.0.0.1:5432/memora

Traffic goes to loopback addresses only. The run is bounded by --run-time and --max-requests;
the drain by --drain-timeout. Exit status: 0 when every request succeeded and every acknowledged
item is in the database, 1 otherwise. See docs/loadtests.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psycopg

from loadtests import conversations
from loadtests.chaos import STACK_ENV, ChaosMonkey, Fault, backlog_recovery, schedule
from loadtests.corpus import turn
from loadtests.replica_lag import LagSampler
from memora.basics.config import Settings
from memora.infra.embedded import free_port
from memora_client import MemoraClient
from services.cli.stack import Stack

SCENARIOS: dict[str, list[str]] = {
    "chaos": ["ChatIngestUser", "SearchUser"],  # mixed, with faults (loadtests/chaos.py)
    "chat": ["ChatIngestUser"],
    "mixed": ["ChatIngestUser", "SearchUser"],
    "search": ["SearchUser"],
}
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
ROOT = LOCUSTFILE.parent.parent


# ---------------------------------------------------------------------------- helpers
def require_loopback(url: str) -> None:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise SystemExit(f"refusing to send load to {url!r}: only loopback addresses are allowed")


def percentiles(values: list[float], points: tuple[int, ...] = (50, 95, 99)) -> dict[str, float]:
    if not values:
        return {f"p{p}": float("nan") for p in points} | {"max": float("nan")}
    ordered = sorted(values)
    out = {
        f"p{p}": ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] for p in points
    }
    out["max"] = ordered[-1]
    return out


@contextmanager
def embedded_stack(
    out: Path, keep: bool, env: dict[str, str] | None = None
) -> Iterator[tuple[str, str, Stack | None]]:
    """The whole stack (PostgreSQL, Redis, API, query service, workers, beat) on loopback."""
    data = Path(tempfile.mkdtemp(prefix="memora-loadtest-", dir=tempfile.gettempdir()))
    settings = Settings(
        data_dir=data,
        host="127.0.0.1",
        port=free_port(),
        query_port=free_port(),
        database_url=None,
        broker_url=None,
        llm_base_url=None,
        llm_api_key=None,
    )
    stack = Stack(
        settings, log_dir=out / "logs", extra_env={"MEMORA_EXTRACTOR": "local", **(env or {})}
    )
    try:
        t0 = time.monotonic()
        stack.start()
        stack.wait_ready()
        print(f"stack ready in {time.monotonic() - t0:.1f}s (logs: {out / 'logs'})", flush=True)
        yield f"http://127.0.0.1:{settings.port}", settings.require_database_url(), stack
    finally:
        stack.stop()
        if not keep:
            shutil.rmtree(data, ignore_errors=True)


# ---------------------------------------------------------------------------- phases
def seed(host: str, run_id: str, agents: int, batches: int, turns: int) -> dict[str, Any]:
    """Memories for the searches to find: `agents` × `batches` documents of `turns` turns."""
    rng = random.Random(run_id)
    ledger: dict[str, Any] = {"batches": {}, "items": {}, "documents": {}, "operations": []}
    with MemoraClient(host, timeout=60, max_retries=0) as client:
        for a in range(agents):
            agent = f"lt-{run_id}-s{a}"
            for b in range(batches):
                items = [{"content": f"Alice: {turn(rng)}"} for _ in range(turns)]
                accepted = client.store_batch(agent, items, f"seed-{b}")
                ledger["batches"][agent] = ledger["batches"].get(agent, 0) + 1
                ledger["items"][agent] = ledger["items"].get(agent, 0) + turns
                ledger["documents"][agent] = ledger["documents"].get(agent, 0) + 1
                ledger["operations"].append(str(accepted.operation_id))
    return ledger


def run_locust(
    args: argparse.Namespace, host: str, run_id: str, search_agents: list[str], out: Path
) -> tuple[dict[str, Any], int]:
    ledger_path = out / "ledger.json"
    env = dict(os.environ)
    env.update(
        MEMORA_LT_RUN_ID=run_id,
        MEMORA_LT_LEDGER=str(ledger_path),
        MEMORA_LT_MAX_REQUESTS=str(args.max_requests),
        MEMORA_LT_CHAT_AGENTS=str(args.chat_agents),
        MEMORA_LT_SEARCH_AGENTS=",".join(search_agents),
        MEMORA_LT_QUERY_HOST=args.query_host or "",
        MEMORA_LT_MAX_TURNS=str(args.max_turns),
        MEMORA_LT_CHAT_MODE=args.chat_mode,
        MEMORA_LT_CONVERSATION_MESSAGES=str(args.conversation_messages),
        MEMORA_LT_PATIENCE_SECONDS=str(args.patience if args.scenario == "chaos" else 0),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--users",
        str(args.users),
        "--spawn-rate",
        str(args.spawn_rate),
        "--run-time",
        args.run_time,
        "--stop-timeout",
        "30",
        "--host",
        host,
        "--csv",
        str(out / "locust"),
        "--only-summary",
        "--loglevel",
        "WARNING",
        "--exit-code-on-error",
        "0",
        *SCENARIOS[args.scenario],
    ]
    print("$ " + " ".join(cmd[1:]), flush=True)
    limit = _seconds(args.run_time) + 120
    proc = subprocess.run(cmd, env=env, cwd=ROOT, timeout=limit, check=False)
    if not ledger_path.exists():
        raise SystemExit(f"locust wrote no ledger (exit code {proc.returncode})")
    return json.loads(ledger_path.read_text()), proc.returncode


def drain(db_url: str, prefix: str, timeout: float) -> float:
    """Waits until none of the run's operations is queued or running; returns the seconds."""
    t0 = time.monotonic()
    with psycopg.connect(db_url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM operations WHERE agent_id LIKE %s "
                "AND status IN ('queued', 'running')",
                (prefix + "%",),
            ).fetchone()
            pending = int(row[0]) if row else 0
            if pending == 0:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                print(f"drain timed out with {pending} operations pending", flush=True)
                return time.monotonic() - t0
            time.sleep(1.0)


def verify(db_url: str, prefix: str, accepted: dict[str, Any]) -> dict[str, Any]:
    """Database rows per agent against what the API acknowledged."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        docs = {
            r[0]: (int(r[1]), int(r[2]))
            for r in conn.execute(
                "SELECT agent_id, count(*), coalesce(sum(item_count), 0) FROM documents "
                "WHERE agent_id LIKE %s GROUP BY agent_id",
                (prefix + "%",),
            )
        }
        units = {
            r[0]: (int(r[1]), int(r[2]))
            for r in conn.execute(
                "SELECT agent_id, count(*), count(embedding) FROM memory_units "
                "WHERE agent_id LIKE %s GROUP BY agent_id",
                (prefix + "%",),
            )
        }
        statuses = {
            r[0]: int(r[1])
            for r in conn.execute(
                "SELECT status, count(*) FROM operations WHERE agent_id LIKE %s GROUP BY status",
                (prefix + "%",),
            )
        }
        lag_rows = conn.execute(
            "SELECT extract(epoch FROM finished_at - created_at), created_at, finished_at "
            "FROM operations WHERE id = ANY(%s::uuid[]) AND status = 'completed'",
            (accepted["operations"],),
        ).fetchall()
    problems = []
    agents = set(accepted["batches"]) | set(docs)
    for agent in sorted(agents):
        want_docs = accepted["documents"].get(agent, 0)
        want_items = accepted["items"].get(agent, 0)
        got_docs, got_items = docs.get(agent, (0, 0))
        got_units, embedded = units.get(agent, (0, 0))
        # One substantive turn per item: the local extractor keeps each as one unit.
        if (got_docs, got_items, got_units, embedded) != (
            want_docs,
            want_items,
            want_items,
            want_items,
        ):
            problems.append(
                f"{agent}: acknowledged {want_items} items in {want_docs} documents; database has "
                f"{got_docs} documents / {got_items} items / {got_units} units "
                f"({embedded} embedded)"
            )
    lags = [float(r[0]) for r in lag_rows]
    first = min((r[1] for r in lag_rows), default=None)
    last = max((r[2] for r in lag_rows), default=None)
    # Lag by minute of posting: steady when the pipeline keeps up, growing when it falls behind.
    by_minute: dict[int, list[float]] = {}
    for lag, created, _ in lag_rows:
        by_minute.setdefault(int((created - first).total_seconds() // 60), []).append(float(lag))
    lag_by_minute = {
        m: {k: round(v, 2) for k, v in percentiles(by_minute[m], (50, 95)).items()}
        for m in sorted(by_minute)
    }
    span = (last - first).total_seconds() if first and last else float("nan")
    return {
        "agents": len(agents),
        "documents": sum(d for d, _ in docs.values()),
        "items": sum(i for _, i in docs.values()),
        "units": sum(u for u, _ in units.values()),
        "operations": statuses,
        "problems": problems,
        "lag_seconds": percentiles(lags),
        "lag_by_minute": lag_by_minute,
        "pipeline_span_seconds": span,
        "completed_operations": len(lags),
    }


def endpoint_stats(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per request name: count, failures, rate and exact latency percentiles (milliseconds)."""
    elapsed = max(run["stopped_at"] - run["started_at"], 1e-9)
    stats = {}
    for name, values in sorted(run["latencies_ms"].items()):
        p = percentiles(values)
        stats[name] = {
            "requests": len(values),
            "failures": int(run["failures"].get(name, 0)),
            "rps": round(len(values) / elapsed, 1),
            **{f"{k}_ms": round(v, 1) for k, v in p.items()},
        }
    return stats


def _seconds(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    total, number = 0, ""
    for ch in text.strip():
        if ch.isdigit():
            number += ch
        else:
            total += int(number) * units[ch]
            number = ""
    return total + (int(number) if number else 0)


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="mixed")
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--spawn-rate", type=float, default=4)
    parser.add_argument("--run-time", default="60s", help="locust time string: 90s, 5m")
    parser.add_argument("--max-requests", type=int, default=50_000, help="0: no limit")
    parser.add_argument("--chat-agents", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=4, help="turns per chat batch (1..N)")
    parser.add_argument(
        "--chat-mode",
        choices=("append", "documents"),
        default="append",
        help="chat users append to live conversations, or post each batch as its own document",
    )
    parser.add_argument(
        "--conversation-messages", type=int, default=100, help="append mode: then a new one"
    )
    parser.add_argument("--seed-agents", type=int, default=4)
    parser.add_argument("--seed-batches", type=int, default=10)
    parser.add_argument("--seed-turns", type=int, default=20)
    parser.add_argument("--host", help="a running write API (loopback); default: start a stack")
    parser.add_argument("--query-host", help="send searches to this query service directly")
    parser.add_argument("--database-url", default=os.environ.get("MEMORA_DATABASE_URL"))
    parser.add_argument("--drain-timeout", type=float, default=600)
    parser.add_argument("--out", type=Path, help="results folder (default loadtests/results/…)")
    parser.add_argument("--keep", action="store_true", help="keep the stack's data folder")
    chaos = parser.add_argument_group("chaos scenario (embedded stack only)")
    chaos.add_argument("--chaos-rounds", type=int, default=0, help="0: one per 7 minutes")
    chaos.add_argument("--postgres-down", type=float, default=20, help="seconds stopped")
    chaos.add_argument("--redis-down", type=float, default=10, help="seconds stopped")
    chaos.add_argument("--worker-restart-delay", type=float, default=3, help="seconds")
    chaos.add_argument("--patience", type=float, default=300, help="seconds a batch is retried")
    args = parser.parse_args(argv)
    if args.scenario == "chaos" and args.host:
        parser.error("the chaos scenario starts and breaks its own stack: no --host")

    if args.host:
        require_loopback(args.host)
        if not args.database_url:
            parser.error("--host needs --database-url (or MEMORA_DATABASE_URL) to verify")
    if args.query_host:
        require_loopback(args.query_host)
    run_id = uuid.uuid4().hex[:8]
    out = args.out or ROOT / "loadtests" / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-{run_id}"
    out.mkdir(parents=True, exist_ok=True)
    stack_cm: Any = (
        _given(args.host, args.database_url)
        if args.host
        else embedded_stack(out, args.keep, STACK_ENV if args.scenario == "chaos" else None)
    )

    prefix = f"lt-{run_id}-"
    faults: list[Fault] = []
    chaos_errors: list[str] = []
    with stack_cm as (host, db_url, stack):
        search_agents: list[str] = []
        ledger: dict[str, Any] = {"batches": {}, "items": {}, "documents": {}, "operations": []}
        if args.scenario in ("mixed", "search", "chaos") and args.seed_agents:
            t0 = time.monotonic()
            ledger = seed(host, run_id, args.seed_agents, args.seed_batches, args.seed_turns)
            search_agents = sorted(ledger["batches"])
            drain(db_url, prefix, args.drain_timeout)
            print(f"seeded {sum(ledger['items'].values())} items in {time.monotonic() - t0:.1f}s")
        seed_ops = len(ledger["operations"])
        monkey = None
        if args.scenario == "chaos":
            seconds = _seconds(args.run_time)
            faults = schedule(seconds, args.chaos_rounds or max(1, seconds // 420))
            monkey = ChaosMonkey(
                stack,
                host,
                db_url,
                run_id,
                faults,
                postgres_down=args.postgres_down,
                redis_down=args.redis_down,
                worker_restart_delay=args.worker_restart_delay,
            )
            stack.supervise()  # workers that exit are started again, as an orchestrator would
            monkey.begin()
        replica = stack is not None and stack.settings.read_database_url
        sampler = LagSampler(f"http://127.0.0.1:{stack.settings.query_port}") if replica else None
        try:
            with sampler or nullcontext():
                run, _ = run_locust(args, host, run_id, search_agents, out)
        finally:
            if monkey is not None:
                monkey.finish()
                chaos_errors = monkey.errors
        drained = drain(db_url, prefix, args.drain_timeout)
        for key in ("batches", "items", "documents"):
            for agent, n in run[key].items():
                ledger[key][agent] = ledger[key].get(agent, 0) + n
        ledger["operations"] += run["operations"]
        if faults:
            probe = f"{prefix}probe"
            n = sum(f.probe_items for f in faults)  # one-item batches, each its own document
            ledger["batches"][probe] = ledger["items"][probe] = ledger["documents"][probe] = n
            ledger["operations"] += [op for f in faults for op in f.probe_operations]
            backlog_recovery(db_url, prefix, faults)
        check = verify(db_url, prefix, ledger)
        chats = (
            conversations.check(host, db_url, run["conversations"])
            if run["conversations"]
            else None
        )
        # Lag of the load phase only (the seed ran before it, with nothing else going on).
        run_check = verify(
            db_url, prefix, {**ledger, "operations": ledger["operations"][seed_ops:]}
        )

    stats = endpoint_stats(run)
    elapsed = max(run["stopped_at"] - run["started_at"], 1e-9)
    run_items = sum(run["items"].values())
    failures = sum(int(s["failures"]) for s in stats.values())
    summary = {
        "scenario": args.scenario,
        "command": " ".join(
            [Path(sys.executable).name, "-m", "loadtests.run", *(argv or sys.argv[1:])]
        ),
        "machine": f"{os.cpu_count()} cores, {_memory_gib():.0f} GiB, {platform.platform()}",
        "users": args.users,
        "load_seconds": round(elapsed, 1),
        "requests": sum(int(s["requests"]) for s in stats.values()),
        "failures": failures,
        "unacknowledged_batches": len(run["unacknowledged"]),
        "ingest": {
            "batches": sum(run["batches"].values()),
            "items": run_items,
            "items_per_second_accepted": round(run_items / elapsed, 1),
            "items_per_second_processed": round(run_items / run_check["pipeline_span_seconds"], 1)
            if run_items
            and run_check["pipeline_span_seconds"] == run_check["pipeline_span_seconds"]
            else None,
            "drain_after_load_seconds": round(drained, 1),
            "pipeline_lag_seconds": {k: round(v, 2) for k, v in run_check["lag_seconds"].items()},
            "pipeline_lag_by_minute": run_check["lag_by_minute"],
        },
        "endpoints": stats,
        "verification": {
            k: v for k, v in check.items() if k not in ("lag_seconds", "lag_by_minute")
        },
        "lost_items": len(check["problems"]),
        "conversations": chats,
        "unavailable_503": run.get("unavailable", {}),
    }
    if sampler is not None:
        summary["read_replica"] = sampler.report()
    if args.scenario == "chaos":
        summary["chaos"] = {
            "stack_env": STACK_ENV,
            "faults": [f.report() for f in faults],
            "errors": chaos_errors,
            "workers_revived": list(stack.revived),
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(report(summary))
    print(f"results: {out}")
    ok = failures == 0 and not check["problems"] and not run["unacknowledged"]
    ok = ok and (chats is None or chats["ok"])
    if args.scenario == "chaos":
        recovered = all(f.injected_at and f.recovery.get("pipeline_s") for f in faults)
        ok = ok and recovered and not chaos_errors
    return 0 if ok else 1


@contextmanager
def _given(host: str, db_url: str) -> Iterator[tuple[str, str, None]]:
    yield host.rstrip("/"), db_url, None


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return float("nan")


def report(s: dict[str, Any]) -> str:
    lines = [
        f"scenario {s['scenario']}: {s['users']} users for {s['load_seconds']}s, "
        f"{s['requests']} requests, {s['failures']} failures",
    ]
    ingest = s["ingest"]
    if ingest["items"]:
        lag = ingest["pipeline_lag_seconds"]
        lines.append(
            f"ingest: {ingest['items']} items in {ingest['batches']} batches, "
            f"{ingest['items_per_second_accepted']} items/s accepted, "
            f"{ingest['items_per_second_processed']} items/s through the pipeline; "
            f"lag POST→finished p50 {lag['p50']}s p95 {lag['p95']}s p99 {lag['p99']}s "
            f"max {lag['max']}s; drained {ingest['drain_after_load_seconds']}s after the load"
        )
        minutes = ingest["pipeline_lag_by_minute"]
        lines.append(
            "lag p50 by minute of posting: "
            + ", ".join(f"{m}: {v['p50']}s" for m, v in minutes.items())
        )
    for name, e in s["endpoints"].items():
        lines.append(
            f"{name}: {e['requests']} requests ({e['rps']:.1f}/s), {e['failures']} failures, "
            f"p50 {e['p50_ms']:.0f} ms, p95 {e['p95_ms']:.0f} ms, p99 {e['p99_ms']:.0f} ms"
        )
    v = s["verification"]
    lines.append(
        f"verification: {v['documents']} documents, {v['items']} items, {v['units']} units in "
        f"the database for {v['agents']} agents; operations {v['operations']}; "
        + ("NO LOST ITEMS" if not v["problems"] else f"{len(v['problems'])} MISMATCHES:")
    )
    lines += [f"  {p}" for p in v["problems"][:20]]
    if (r := s.get("read_replica")) and r.get("samples"):
        lines.append(
            f"read replica: lag p50 {r['lag_p50_s']}s p95 {r['lag_p95_s']}s max {r['lag_max_s']}s "
            f"({r['samples']} samples); reads {r['reads']}"
        )
    if c := s.get("conversations"):
        lines.append(
            f"conversations: {c['conversations']} checked, {c['messages']} messages acknowledged; "
            f"lost {c['items_lost']} / duplicated {c['items_duplicated']} / out of order "
            f"{c['items_out_of_order']} (document items), lost {c['messages_lost']} / duplicated "
            f"{c['messages_duplicated']} / out of order {c['messages_out_of_order']} (message "
            f"rows); messages without exactly one unit {c['units_not_one']}"
        )
        lines += [f"  {p}" for p in c["problems"]]
    if s.get("unavailable_503"):
        lines.append(f"clear 503s with Retry-After (not failures): {s['unavailable_503']}")
    for f in s.get("chaos", {}).get("faults", []):
        lines.append(
            f"fault {f['kind']} ({f['target']}) at {f['at']}s, down {f['down_seconds']}s: "
            f"recovery {f['recovery']}"
        )
    lines += [f"  chaos error: {e}" for e in s.get("chaos", {}).get("errors", [])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
