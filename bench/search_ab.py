"""Two checkouts' query services on one database, each question sent to both: search latency
of a change against its base, free of what differs between two fresh loads (the HNSW graph is
random, and so is what autovacuum is doing).

    python bench/search_ab.py --data /tmp/ab-100k --build 100000      # once: load the data
    git worktree add --detach /tmp/base HEAD~1
    python bench/search_ab.py --data /tmp/ab-100k --checkout base=/tmp/base \\
        --checkout change=. --queries 100 --filters

The data directory keeps an embedded PostgreSQL loaded as bench/search_latency.py loads it
(then migrated by this checkout). Each checkout's query service runs from its own tree
(`PYTHONPATH`), under row-level security; every question goes to every (checkout, filter)
pair in a rotating order. Reports per pair the p50 and the median per-question ratio to that
checkout's unfiltered search.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py
from common import api_client, wait_ready  # bench/common.py

from memora.basics.config import Settings
from memora.db.migrate import upgrade
from memora.infra.embedded import EmbeddedPostgres, free_port
from memora.nlp.embedding import Embedder


def serve(tree: Path, url: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = os.environ | {
        "MEMORA_DATABASE_URL": url, "MEMORA_QUERY_PORT": str(port), "MEMORA_ROW_SECURITY": "true",
        "PYTHONPATH": f"{tree / 'shared'}{os.pathsep}{tree}", "TOKENIZERS_PARALLELISM": "false",
    }  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "services.api.query_app:create_app", "--factory",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=tree, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    return process, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="embedded PostgreSQL's directory")
    parser.add_argument("--build", type=int, metavar="N", help="load N memories first")
    parser.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--filters", action="store_true", help="each of FILTER_SETS too")
    args = parser.parse_args()
    postgres = EmbeddedPostgres(args.data)
    url = postgres.start()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        upgrade(url, Settings().embedding_dim)
        if args.build:
            embedder = Embedder(Settings().embedding_model, torch_threads=2)
            texts = bench.sentence_pool(random.Random(7), 3000)
            bench.load(url, args.build, embedder, texts, pair=True)
        bases: dict[str, str] = {}
        for spec in args.checkout:
            name, _, path = spec.partition("=")
            process, bases[name] = serve(Path(path).resolve(), url, args.data / f"{name}.log")
            processes.append(process)
        if not bases:
            return
        for base in bases.values():
            wait_ready(base)
        filters = list(bench.FILTER_SETS) if args.filters else ["none"]
        pairs = [(name, f) for name in bases for f in filters]
        latency: dict[tuple[str, str], dict[int, float]] = {pair: {} for pair in pairs}
        clients = {name: api_client(base, timeout=60) for name, base in bases.items()}
        for i, question in enumerate(bench.questions(args.queries + args.warmup)):
            for name, f in pairs[i % len(pairs) :] + pairs[: i % len(pairs)]:
                body: dict[str, Any] = {"agent_id": bench.AGENT, "query": question}
                if bench.FILTER_SETS[f] is not None:  # older checkouts know no `filters`
                    body["filters"] = bench.FILTER_SETS[f]
                started = time.perf_counter()
                clients[name].request("POST", "/api/search", body)
                if i >= args.warmup:
                    latency[(name, f)][i] = (time.perf_counter() - started) * 1000
        for f in filters:
            cells = []
            for name in bases:
                plain = latency[(name, "none")]
                ratio = statistics.median(v / plain[i] for i, v in latency[(name, f)].items())
                p50 = statistics.median(latency[(name, f)].values())
                p95 = statistics.quantiles(latency[(name, f)].values(), n=20)[-1]
                cells.append(f"{name} p50 {p50:5.1f} ms, p95 {p95:5.1f} ms, ratio {ratio:.3f}")
            if len(bases) == 2:  # the second checkout against the first, question by question
                first, second = (latency[(name, f)] for name in bases)
                against = statistics.median(second[i] / first[i] for i in first)
                cells.append(f"{'/'.join(reversed(bases))} {against:.3f}")
            print(f"{f:20s} " + " | ".join(cells), flush=True)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        postgres.stop()


if __name__ == "__main__":
    main()
