"""Latency and payload of GET /api/graph (the UI's memory graph) for one agent holding N
memories, bulk-loaded exactly as bench/search_latency.py loads them (plus each memory's
person as an entity mention).

    python bench/graph_latency.py --sizes 100000 --requests 300

The write API in its own process (uvicorn, as `memora serve` runs it) on the embedded
PostgreSQL; one client sends requests one after another over HTTP with gzip, cycling through
the UI's kinds of request: the newest 500 nodes one hop out, the next page by cursor, seeded by
a keyword search, seeded by an entity, filtered by fact type and by link type, and two hops
out. Reports p50/p95/p99 per kind and overall, node and edge counts, bytes on the wire, and the
CPU time the API process and PostgreSQL spent per request (what the latency comes down to on
an idle machine; on a shared one the wall-clock figures include waiting for a core).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memora_client import MemoraError

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import api_client  # bench/common.py
from search_latency import AGENT, DOING, PEOPLE, WHERE, load, sentence_pool

from memora.basics.config import Settings
from memora.db.pool import connect
from memora.infra.embedded import free_port
from memora.nlp.embedding import Embedder
from services.cli.stack import Stack


def add_mentions(url: str) -> None:
    """Each memory mentions the person its text starts with (the entities load() made)."""
    with connect(url) as conn:
        conn.execute(
            "INSERT INTO unit_entities (unit_id, entity_id, mention) "
            "SELECT u.id, e.id, e.canonical_name FROM memory_units u JOIN entities e "
            "ON e.agent_id = u.agent_id AND e.canonical_name = split_part(u.text, ' ', 1) "
            "WHERE u.agent_id = %s ON CONFLICT DO NOTHING",
            (AGENT,),
        )
        conn.execute("ANALYZE unit_entities")
        conn.commit()


def wait_live(base: str, stack: Stack, timeout: float = 120.0) -> None:
    """Until the API answers (not /health/ready: no workers run here, on purpose)."""
    deadline = time.monotonic() + timeout
    with api_client(base, timeout=5) as memora:
        while time.monotonic() < deadline:
            stack.check_alive()
            with contextlib.suppress(MemoraError):
                memora.request("GET", "/health/live")
                return
            time.sleep(0.5)
    raise TimeoutError(f"the API did not start within {timeout:.0f}s")


def cpu_ms(pids: list[int]) -> float:
    """User + system CPU time of these processes so far, in ms (Linux /proc)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def server_pids(stack: Stack) -> list[int]:
    """The API process and PostgreSQL's server processes (its backends among them)."""
    assert stack.postgres is not None
    postmaster = int((stack.postgres.pgdata / "postmaster.pid").read_text().split()[0])
    children = [
        int(stat.parent.name)
        for stat in Path("/proc").glob("[0-9]*/stat")
        if stat.read_text().rsplit(")", 1)[1].split()[1] == str(postmaster)
    ]
    return [stack.processes["api"].pid, postmaster, *children]


def kinds(rng: random.Random, cursor: str | None) -> list[tuple[str, dict[str, Any]]]:
    base = {"agent_id": AGENT, "limit": 500}
    word = rng.choice(DOING).split()[-1]
    return [
        ("newest, depth 1", base),
        ("next page (cursor)", {**base, "cursor": cursor}),
        ("seeded by search", {**base, "q": f"{word} {rng.choice(WHERE).split()[-1]}"}),
        ("seeded by entity", {**base, "entity": rng.choice(PEOPLE)}),
        ("fact_type filter", {**base, "fact_type": "world"}),
        ("link_type filter", {**base, "link_type": ["semantic", "entity"]}),
        ("depth 2", {**base, "depth": 2}),
    ]


def measure(base: str, requests: int, warmup: int, pids: list[int]) -> dict[str, Any]:
    rng = random.Random(5)
    per_kind: dict[str, list[float]] = {}
    sizes: dict[str, list[tuple[int, int, int, int]]] = {}
    # httpx, not memora_client, for the timed requests: the figures include the wire size of
    # each gzip-compressed answer, which only the raw HTTP response shows.
    with httpx.Client(base_url=base, timeout=60) as client:
        first = client.get("/api/graph", params={"agent_id": AGENT, "limit": 500}).json()
        cursor = first["next_cursor"]
        for i in range(requests + warmup):
            name, params = kinds(rng, cursor)[i % 7]
            if i == warmup:
                cpu_before = cpu_ms(pids)
            started = time.perf_counter()
            response = client.get("/api/graph", params=params)
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            if i < warmup:
                continue
            body = response.json()
            per_kind.setdefault(name, []).append(elapsed)
            wire = int(response.headers.get("content-length") or len(response.content))
            sizes.setdefault(name, []).append(
                (len(body["nodes"]), len(body["edges"]), wire, len(response.content))
            )

    def pct(values: list[float]) -> dict[str, float]:
        return {f"p{p}": round(float(np.percentile(values, p)), 1) for p in (50, 95, 99)}

    everything = [v for values in per_kind.values() for v in values]
    cpu = (cpu_ms(pids) - cpu_before) / len(everything)
    return {
        "overall": {
            **pct(everything),
            "requests": len(everything),
            "server_cpu_ms_per_request": round(cpu, 1),
        },
        "kinds": {
            name: {
                **pct(values),
                "nodes": int(np.median([s[0] for s in sizes[name]])),
                "edges": int(np.median([s[1] for s in sizes[name]])),
                "gzip_kb": round(float(np.median([s[2] for s in sizes[name]])) / 1024, 1),
                "json_kb": round(float(np.median([s[3] for s in sizes[name]])) / 1024, 1),
            }
            for name, values in per_kind.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--requests", type=int, default=350)
    parser.add_argument("--warmup", type=int, default=35)
    parser.add_argument(
        "--data-dir", type=Path, help="reuse a data directory an earlier run loaded (one size)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "graph_latency.json"
    )
    args = parser.parse_args()
    embedder = None if args.data_dir else Embedder(Settings().embedding_model, torch_threads=2)
    report: dict[str, Any] = {}
    for n in args.sizes:
        reuse = args.data_dir is not None and (args.data_dir / "pgdata").is_dir()
        data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix=f"memora-graph-{n}-"))
        settings = Settings(data_dir=data_dir, port=free_port())
        stack = Stack(settings, workers={}, with_query=False, with_beat=False,
                      log_dir=settings.data_dir / "logs")  # fmt: skip
        try:
            stack.start_infrastructure()
            if not reuse:
                started = time.monotonic()
                assert embedder is not None
                texts = sentence_pool(random.Random(7), 3000)
                load(settings.require_database_url(), n, embedder, texts, True)
                add_mentions(settings.require_database_url())
                print(f"{n} memories loaded in {time.monotonic() - started:.0f}s")
            stack.start()  # infrastructure is up: this starts the write API only
            wait_live(f"http://{settings.host}:{settings.port}", stack)
            base = f"http://{settings.host}:{settings.port}"
            pids = server_pids(stack)
            result = measure(base, args.requests, args.warmup, pids)
        finally:
            stack.stop()
        report[str(n)] = result
        print(f"{n}: {json.dumps(result, indent=1)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
