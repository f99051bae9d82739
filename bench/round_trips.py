"""Round trips per message (issue 60): Celery tasks, PostgreSQL transactions and statements that
the stack spends on one message, posted whole and appended 1–2 at a time.

    python bench/round_trips.py
    python bench/round_trips.py --env MEMORA_APPEND_COALESCE_MESSAGES=1   # appends alone
    python bench/round_trips.py --shapes paced --rate 15                  # a live platform's pace

On one stack (embedded PostgreSQL with pg_stat_statements), each shape sends the same
--conversations conversations of --per-conversation LoCoMo turns: `whole` as one
`POST /api/memories/batch` each from --clients-whole clients, `append` as appends of 1–2
messages, each conversation in order, interleaved from --clients clients (bench/append.py's part
b), as fast as they are answered; `paced` the same appends held to --rate messages/s in all
(each conversation an append every few seconds: the one-message operations of live chats, which
a bulk stream coalesces away). Between shapes the statistics are reset; the bench waits on the
operations table directly (one statement a poll, subtracted). Counted per message: stage tasks
(every attempt of every stage of the shape's operations), transactions (pg_stat_database
commits and rollbacks: the API, the workers and the periodic jobs), statements
(pg_stat_statements calls), the stack's CPU seconds by part; Celery messages sent (Redis `LPUSH`
calls: the stage tasks, one per batch of operations, and their retries, webhook deliveries,
beat's jobs); and the statements that take the most time (execution and planning, planning
also apart).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import redis
from psycopg.rows import dict_row

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from append import LOCOMO, Client, Posted, many, post_whole, stream, turns
from common import BenchStack, api_client, embedded_stack
from ingest import locomo_sessions

ACTIVE = (
    "SELECT count(*) AS n FROM operations WHERE agent_id LIKE %s "
    "AND status IN ('queued', 'running')"
)
TOTALS = (
    "SELECT count(DISTINCT o.id) AS operations, "
    "coalesce(sum((s.value ->> 'attempts')::int), 0) AS tasks "
    "FROM operations o LEFT JOIN LATERAL jsonb_each(o.stages) s ON true WHERE o.agent_id LIKE %s"
)
XACTS = (
    "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database "
    "WHERE datname = current_database()"
)
COUNTS = (
    "SELECT c.key, sum(c.value::text::numeric) AS n FROM operations o, jsonb_each(o.counts) c "
    "WHERE o.agent_id LIKE %s AND jsonb_typeof(c.value) = 'number' GROUP BY c.key ORDER BY 1"
)
TOP = (
    "SELECT calls, total_exec_time + total_plan_time AS ms, total_plan_time AS plan_ms, "
    "left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query "
    "FROM pg_stat_statements WHERE query NOT LIKE %s ORDER BY ms DESC LIMIT %s"
)


def measure(stack: BenchStack, prefix: str, send: Any, messages: int, top: int) -> dict[str, Any]:
    """Reset the counters, send, wait until the prefix's operations are all done; the counts."""
    broker = redis.Redis.from_url(stack.broker_url)
    broker.config_resetstat()
    with psycopg.connect(stack.database_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        xacts = conn.execute(XACTS).fetchone()["n"]  # type: ignore[index]
        cpu = stack.cpu_by_part()
        send()
        polls = 0
        while True:
            polls += 1
            if conn.execute(ACTIVE, (f"{prefix}%",)).fetchone()["n"] == 0:  # type: ignore[index]
                break
            time.sleep(0.5)
        after = stack.cpu_by_part()
        pushes = broker.info("commandstats").get("cmdstat_lpush", {}).get("calls", 0)
        parts = {k: (v - cpu.get(k, 0.0)) / messages for k, v in sorted(after.items())}
        time.sleep(1.0)  # pg_stat_database is updated by the backends when they go idle
        conn.execute("SELECT pg_stat_clear_snapshot()")
        xacts = conn.execute(XACTS).fetchone()["n"] - xacts - polls  # type: ignore[index]
        totals = conn.execute(TOTALS, (f"{prefix}%",)).fetchone()
        mine = "%pg_stat%"
        statements = conn.execute(
            "SELECT sum(calls) AS n FROM pg_stat_statements WHERE query NOT LIKE %s "
            "AND query NOT LIKE %s",
            (mine, "SELECT count(*) AS n FROM operations WHERE agent_id LIKE%"),
        ).fetchone()["n"]  # type: ignore[index]
        frequent = conn.execute(TOP, (mine, top)).fetchall()
        counted = {r["key"]: float(r["n"]) for r in conn.execute(COUNTS, (f"{prefix}%",))}
    assert totals is not None
    return {
        "messages": messages,
        "operations": totals["operations"],
        "tasks_per_message": totals["tasks"] / messages,
        "celery_messages_per_message": pushes / messages,
        "transactions_per_message": xacts / messages,
        "statements_per_message": float(statements) / messages,
        "counts": counted,
        "cpu_s_per_message": sum(parts.values()),
        "cpu_s_per_message_by_part": {k: round(v, 4) for k, v in parts.items() if v > 0.0005},
        "top": [
            {
                "calls_per_message": r["calls"] / messages,
                "ms_per_message": r["ms"] / messages,
                "planning_ms_per_message": r["plan_ms"] / messages,
                "query": r["query"],
            }
            for r in frequent
            if not r["query"].startswith("SELECT count(*) AS n FROM operations WHERE agent_id")
        ],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo JSON")
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--per-conversation", type=int, default=40)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--clients-whole", type=int, default=8)
    parser.add_argument("--top", type=int, default=40, help="most frequent statements shown")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the stack")
    parser.add_argument("--shapes", default="whole,append", help="whole, append, paced")
    parser.add_argument("--rate", type=float, default=15.0, help="paced: messages/s in all")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in args.env)
    source = turns(locomo_sessions(args.locomo))
    shape = (source, args.conversations, args.per_conversation, args.agents)
    results: dict[str, Any] = {"command": " ".join(sys.argv), "env": env}
    with embedded_stack(env=env, statements=True) as stack, api_client(stack.url) as memora:
        client = Client(memora)
        for name in args.shapes.split(","):
            prefix = f"bench-{name}-{uuid.uuid4().hex[:6]}"
            conversations = many(prefix, *shape, seed=3)
            count = sum(len(c.messages) for c in conversations)
            send: Callable[[], list[Posted]]
            if name == "whole":
                send = partial(post_whole, client, conversations, args.clients_whole)
            else:
                rate = args.rate if name == "paced" else None
                send = partial(stream, client, conversations, args.clients, rate)
            results[name] = measure(stack, prefix, send, count, args.top)
    for name in args.shapes.split(","):
        r = results[name]
        print(
            f"{name:6s}: {r['messages']} messages in {r['operations']} operations; per message "
            f"{r['tasks_per_message']:.2f} stage runs, {r['celery_messages_per_message']:.2f} "
            f"Celery messages, {r['transactions_per_message']:.2f} "
            f"transactions, {r['statements_per_message']:.1f} statements, "
            f"{r['cpu_s_per_message']:.3f} CPU s"
        )
        print(
            "    CPU s per message: "
            + ", ".join(f"{k} {v:.4f}" for k, v in r["cpu_s_per_message_by_part"].items())
        )
        for t in r["top"]:
            print(
                f"    {t['ms_per_message']:6.3f} ms (planning {t['planning_ms_per_message']:.3f}) "
                f"{t['calls_per_message']:5.2f}×  {t['query']}"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
