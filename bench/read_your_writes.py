"""Read-your-writes through a real streaming replica (issue 56): an append, then at once a
search naming its operation (`after_operation`), as a chat platform's "did it remember?" check.

    python bench/read_your_writes.py                       # with a replica (memora serve's)
    python bench/read_your_writes.py --read-replicas 0     # the primary only, for comparison

On the whole embedded stack (`MEMORA_READ_REPLICAS=1`: a streaming standby the query service
reads), `--probes` times on agents of their own: one message with a word never said before is
appended, then searched with `after_operation`; a probe passes when the search finds it. First
on the quiet stack, then while `--load-clients` threads stream appends of 1–2 LoCoMo turns into
conversations of their own at `--load-rate` messages a second in all (30: below what the
2-core VM's pipeline carries, so that the probes measure the replica, not a backlog), the query
service's `memora_read_replica_lag_seconds` read every 0.25 s. Reports, per phase: probes
passed, append → found p50 / p95 / max, where the searches were read (the
`X-Memora-Read-Source` header) and the replica's lag. Last, failover under the same load:
searches back to back while the standby is stopped for `--outage` seconds and started again;
failed answers, and how long reads took to move to the primary and back.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from append import LOCOMO, turns
from common import BenchStack, embedded_stack
from ingest import locomo_sessions

from memora.infra.embedded import EmbeddedPostgres

LAG = re.compile(r"^memora_read_replica_lag_seconds (\S+)$", re.M)


def probe(client: httpx.Client, tag: str, n: int) -> dict[str, Any]:
    word = f"quokka{uuid.uuid4().hex[:8]}"
    agent = f"ryw-{tag}-{n}"
    started = time.monotonic()
    said = client.post(
        f"/api/agents/{agent}/conversations/chat/messages",
        json={"messages": [{"message_id": word, "role": "user", "content": f"My cat is {word}."}]},
    )
    said.raise_for_status()
    found = client.post(
        "/api/search",
        json={
            "agent_id": agent,
            "query": f"What is my cat {word} called?",
            "after_operation": said.json()["operation_id"],
        },
    )
    found.raise_for_status()
    return {
        "found": any(word in hit["text"] for hit in found.json()["results"]),
        "seconds": time.monotonic() - started,
        "source": found.headers.get("x-memora-read-source", "primary (no header)"),
    }


def load(base: str, stop: threading.Event, clients: int, rate: float, tag: str) -> list[int]:
    """`clients` threads appending 1–2 LoCoMo turns at a time to conversations of their own,
    `rate` messages a second in all; the messages each sent."""
    source = turns(locomo_sessions(LOCOMO))
    sent = [0] * clients

    def run(k: int) -> None:
        started = time.monotonic()
        with httpx.Client(base_url=base, timeout=60) as client:
            stream = itertools.cycle(source[k * 97 :] + source[: k * 97])
            for n in itertools.count():
                if stop.wait(max(0.0, started + sent[k] * clients / rate - time.monotonic())):
                    return
                batch = [next(stream) for _ in range(1 + n % 2)]
                messages = [
                    {**m, "message_id": f"{k}-{n}-{i}", "metadata": {}} for i, m in enumerate(batch)
                ]
                client.post(
                    f"/api/agents/load-{tag}-{k}/conversations/c{n // 30}/messages",
                    json={"messages": messages},
                ).raise_for_status()
                sent[k] += len(messages)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join()
    return sent


def lags(query_base: str, stop: threading.Event) -> list[float]:
    seen: list[float] = []
    with httpx.Client(base_url=query_base, timeout=10) as client:
        while not stop.wait(0.25):
            if match := LAG.search(client.get("/metrics").text):
                seen.append(float(match.group(1)))
    return seen


def phase(client: httpx.Client, tag: str, probes: int) -> dict[str, Any]:
    runs = [probe(client, tag, n) for n in range(probes)]
    seconds = sorted(r["seconds"] for r in runs)
    sources: dict[str, int] = {}
    for r in runs:
        sources[r["source"]] = sources.get(r["source"], 0) + 1
    return {
        "found": f"{sum(r['found'] for r in runs)} / {probes}",
        "append_to_found_p50_s": round(statistics.median(seconds), 3),
        "append_to_found_p95_s": round(seconds[max(0, round(0.95 * probes) - 1)], 3),
        "append_to_found_max_s": round(seconds[-1], 3),
        "read_from": sources,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[max(0, round(q * len(ordered)) - 1)], 3)


def under_load(base: str, query_base: str, client: httpx.Client, args: Any) -> dict[str, Any]:
    stop, tag = threading.Event(), uuid.uuid4().hex[:6]
    sent: list[int] = []
    seen: list[float] = []
    loader = threading.Thread(
        target=lambda: sent.extend(load(base, stop, args.load_clients, args.load_rate, tag))
    )
    watcher = threading.Thread(target=lambda: seen.extend(lags(query_base, stop)))
    loader.start()
    watcher.start()
    time.sleep(5)  # the load under way
    started = time.monotonic()
    loaded = phase(client, "loaded", args.probes)
    elapsed = time.monotonic() - started + 5
    stop.set()
    loader.join()
    watcher.join()
    loaded["load_messages_per_s"] = round(sum(sent) / elapsed, 1)
    if seen:
        loaded["replica_lag_p95_s"] = percentile(seen, 0.95)
        loaded["replica_lag_max_s"] = max(seen)
    return loaded


def failover(stack: BenchStack, args: Any) -> dict[str, Any]:
    """Searches back to back under the same load while the standby is stopped for
    `--outage` seconds, then started again: failed answers, and how long reads took to move
    to the primary and back."""
    port = int(urlsplit(stack.read_database_url).port or 0)
    primary = EmbeddedPostgres(stack.data_dir, port=int(urlsplit(stack.database_url).port or 0))
    replica = EmbeddedPostgres(stack.data_dir / "replica", port=port)
    stop, tag = threading.Event(), uuid.uuid4().hex[:6]
    loader = threading.Thread(target=load, args=(stack.url, stop, args.load_clients, 30.0, tag))
    loader.start()
    seen: list[tuple[float, int, str]] = []
    events: dict[str, float] = {}
    started = time.monotonic()
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        while (now := time.monotonic() - started) < 3 * args.outage:
            if now > args.outage and "stopped" not in events:
                replica.stop()
                events["stopped"] = time.monotonic() - started
            if now > 2 * args.outage and "started" not in events:
                replica.start_standby(primary)
                events["started"] = time.monotonic() - started
            answer = client.post("/api/search", json={"agent_id": f"load-{tag}-0", "query": "work"})
            where = answer.headers.get("x-memora-read-source", "")
            seen.append((time.monotonic() - started, answer.status_code, where))
    stop.set()
    loader.join()

    def first(source: str, after: float) -> float | None:
        return next((t - after for t, _, s in seen if t > after and s == source), None)

    return {
        "searches": len(seen),
        "failed": sum(status != 200 for _, status, _ in seen),
        "to_primary_after_stop_s": first("primary", events["stopped"]),
        "back_to_replica_after_start_s": first("replica", events["started"]),
        "read_on": {s: sum(w == s for _, _, w in seen) for s in ("replica", "primary")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--read-replicas", type=int, default=1, choices=(0, 1))
    parser.add_argument("--load-clients", type=int, default=8)
    parser.add_argument(
        "--outage", type=float, default=10.0, help="seconds the standby is stopped (0: no failover)"
    )
    parser.add_argument(
        "--load-rate", type=float, default=30.0, help="messages/s the load appends in all"
    )
    args = parser.parse_args()
    stack_of = embedded_stack(with_query=True, read_replicas=args.read_replicas)
    with stack_of as stack, httpx.Client(base_url=stack.url, timeout=60) as client:
        print("quiet:", phase(client, "quiet", args.probes))
        print("under load:", under_load(stack.url, stack.query_url, client, args))
        if args.read_replicas and args.outage:
            print("failover under load:", failover(stack, args))


if __name__ == "__main__":
    main()
