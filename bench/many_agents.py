"""Search latency with many agents in one database (issue 55): each size class's searches
among the crowd, the first search of an agent the query process has not served yet (cold)
against the later ones (warm), and the same sizes in a database of their own.

    python bench/many_agents.py                                   # 1000×100, 100×1000, 1×100000
    python bench/many_agents.py --shape 300x300 --searches 1500 --clients 4 --pods 2

Each class `COUNTxMEMORIES` is COUNT agents of MEMORIES synthetic memories, loaded as
`bench/search_latency.py` loads its one agent (texts composed from generated chat sentences,
≈16 links a memory), all of them before one HNSW index and VACUUM (ANALYZE). Then one or more
query services (`--pods`, each in its own process; every search goes to one at random, as a
load balancer sends it) take `--searches` distinct questions back to back from `--clients`
clients: each search's class in turn, and within the class an agent drawn by popularity (Zipf
with exponent `--zipf` over the class's agents in a random order: a few hot, most cold). A
search is *cold* when its pod had not searched that agent before. Before timing, `--warmup`
searches to agents of every class warm the processes themselves (models, connections).

The second part (`--alone`, on by default) loads one agent of each size, alone in a database
of its own per class, and sends it the same number of questions per class: its warm p95 is the
base of the crowd's ratio. `--data-root DIR` keeps the databases there between runs (loaded
once per shape: a change of the schema or the loader wants a new DIR). Reports per class:
cold and warm p50 / p95 / p99 and counts, alone p50 / p95, and the ratios (crowd warm / alone
warm p95, cold / warm p95), and each pod's resident memory at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from common import api_client, wait_ready  # bench/common.py
from search_latency import finish_load, load_agent, questions, sentence_pool

from memora.basics.config import Settings
from memora.db.pool import connect
from memora.infra.embedded import free_port
from memora.nlp.embedding import Embedder
from services.cli.stack import Stack

PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class SizeClass:
    count: int
    memories: int

    @property
    def name(self) -> str:
        return f"{self.count}x{self.memories}"

    def agents(self) -> list[str]:
        return [f"m{self.memories}-{k}" for k in range(self.count)]

    @classmethod
    def parse(cls, text: str) -> SizeClass:
        count, memories = text.lower().split("x")
        return cls(int(count), int(memories))


@dataclass
class Timings:
    """Per class, the latencies of cold and warm searches (ms)."""

    cold: dict[str, list[float]] = field(default_factory=dict)
    warm: dict[str, list[float]] = field(default_factory=dict)
    steps: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # traced, warm

    def add(self, size: str, cold: bool, ms: float) -> None:
        (self.cold if cold else self.warm).setdefault(size, []).append(ms)

    def add_trace(self, size: str, trace: dict[str, Any]) -> None:
        steps = self.steps.setdefault(size, {})
        for stage, ms in trace["timings_ms"].items():
            steps.setdefault(stage, []).append(ms)
        for arm, path in trace["paths"].items():
            if path.get("ran", True) and isinstance(path.get("ms"), int | float):
                steps.setdefault(arm, []).append(path["ms"])

    def medians(self, size: str) -> dict[str, float]:
        return {k: round(float(np.median(v)), 1) for k, v in self.steps.get(size, {}).items()}


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    found = {f"p{p}": round(float(np.percentile(values, p)), 1) for p in PERCENTILES}
    return {**found, "n": len(values)}


def load_classes(url: str, classes: list[SizeClass], vectors: np.ndarray, texts: list[str]) -> None:
    started = time.monotonic()
    loaded: list[str] = []
    with connect(url) as conn:
        conn.execute("DROP INDEX IF EXISTS idx_memory_vectors_embedding")
        for size in classes:
            for k, agent in enumerate(size.agents()):
                load_agent(conn, agent, size.memories, vectors, texts, True, seed=k)
                loaded.append(agent)
                if len(loaded) % 100 == 0:
                    conn.commit()
        conn.commit()
        print(f"  {len(loaded)} agents' rows loaded in {time.monotonic() - started:.0f}s")
        finish_load(conn, loaded)


def serve(stack: Stack, settings: Settings, pods: int) -> list[str]:
    stack.start()  # the infrastructure is up: this starts one query service
    bases = [f"http://{settings.host}:{settings.query_port}"]
    for k in range(1, pods):
        port = free_port()
        stack._spawn(
            f"query-{k}",
            ["uvicorn", "services.api.query_app:create_app", "--factory", "--host",
             settings.host, "--port", str(port), "--log-level", "warning"],
            env={"MEMORA_QUERY_PORT": str(port)},
        )  # fmt: skip
        bases.append(f"http://{settings.host}:{port}")
    stack.wait_ready()
    for base in bases:
        wait_ready(base)
    return bases


def popularity(agents: list[str], exponent: float, rng: random.Random) -> list[float]:
    """Zipf weights over `agents` in a random order: the hot ones are no particular ones."""
    ranks = list(range(1, len(agents) + 1))
    rng.shuffle(ranks)
    return [1.0 / r**exponent for r in ranks]


def run_searches(
    bases: list[str],
    classes: list[SizeClass],
    qs: list[str],
    *,
    warmup: int,
    clients: int,
    exponent: float,
    seed: int,
    trace_every: int = 0,
) -> Timings:
    """`len(qs) - warmup` timed searches (the first `warmup` untimed), each to a class in
    turn, an agent of it by popularity and a pod at random, from `clients` clients; every
    `trace_every`-th warm search traced (its stages' and retrievers' times, not timed)."""
    rng = random.Random(seed)
    weights = {c.name: popularity(c.agents(), exponent, rng) for c in classes}
    plan = []
    for i, q in enumerate(qs):
        size = classes[i % len(classes)]
        agent = rng.choices(size.agents(), weights[size.name])[0]
        plan.append((i, q, size.name, agent, rng.randrange(len(bases))))
    seen: set[tuple[int, str]] = set()
    timings = Timings()

    def send(share: list[tuple[int, str, str, str, int]]) -> None:
        http = [api_client(base) for base in bases]
        try:
            for i, q, size, agent, pod in share:
                cold = (pod, agent) not in seen
                seen.add((pod, agent))
                traced = bool(trace_every) and not cold and i % trace_every == 0
                body = {"agent_id": agent, "query": q, "trace": traced}
                started = time.perf_counter()
                found = http[pod].request("POST", "/api/search", body)
                if i < warmup:
                    continue
                if traced:
                    timings.add_trace(size, found["trace"])
                else:
                    timings.add(size, cold, (time.perf_counter() - started) * 1000)
        finally:
            for client in http:
                client.close()

    send(plan[:warmup])
    timed = plan[warmup:]
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, [timed[k::clients] for k in range(clients)]))
    return timings


def resident_mb(stack: Stack) -> dict[str, float]:
    found = {}
    for name, proc in stack.processes.items():
        if name.startswith("query"):
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            found[name] = round(sum(p.memory_info().rss for p in tree) / 2**20)
    return found


def measure(
    classes: list[SizeClass], args: argparse.Namespace, vectors: np.ndarray, texts: list[str],
    *, pods: int, searches: int,
) -> tuple[Timings, dict[str, float]]:  # fmt: skip
    """One database holding `classes` (kept under `--data-root` when given, and loaded only
    the first time), its query pods, and the searches."""
    shape = "-".join(c.name for c in classes)
    if args.data_root is not None:
        data_dir = args.data_root / shape
        data_dir.mkdir(parents=True, exist_ok=True)
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="memora-many-agents-"))
    loaded = data_dir / "loaded"
    settings = Settings(data_dir=data_dir, query_port=free_port())
    stack = Stack(settings, workers={}, with_api=False, with_beat=False,
                  log_dir=settings.data_dir / "logs")  # fmt: skip
    try:
        stack.start_infrastructure()
        if not loaded.exists():
            started = time.monotonic()
            load_classes(settings.require_database_url(), classes, vectors, texts)
            loaded.touch()
            print(f"  loaded in {time.monotonic() - started:.0f}s")
        bases = serve(stack, settings, pods)
        qs = questions(args.warmup + searches, seed=args.seed)
        timings = run_searches(
            bases, classes, qs, warmup=args.warmup, clients=args.clients,
            exponent=args.zipf, seed=args.seed, trace_every=args.trace_every,
        )  # fmt: skip
        return timings, resident_mb(stack)
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", nargs="+", default=["1000x100", "100x1000", "1x100000"])
    parser.add_argument("--searches", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--pods", type=int, default=1)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--trace-every", type=int, default=0, help="0: no traced searches")
    parser.add_argument("--no-alone", dest="alone", action="store_false")
    parser.add_argument(
        "--data-root", type=Path,
        help="keep each database here and load it only once (default: a new one each run)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench/results/many_agents.json"))
    args = parser.parse_args()
    classes = [SizeClass.parse(s) for s in args.shape]
    texts = sentence_pool(random.Random(7), 3000)
    vectors = Embedder(Settings().embedding_model, torch_threads=2).embed(texts)

    crowd, memory = measure(classes, args, vectors, texts, pods=args.pods, searches=args.searches)
    report: dict[str, Any] = {"shape": args.shape, "pods": args.pods, "clients": args.clients,
                              "resident_mb": memory, "classes": {}}  # fmt: skip
    alone: dict[str, list[float]] | None = None
    alone_steps: dict[str, dict[str, float]] = {}
    if args.alone:  # the class's first agent (the same rows), in a database of its own
        per_class = args.searches // len(classes)
        alone, alone_steps = {}, {}
        for c in classes:
            one = SizeClass(1, c.memories)
            timings = measure([one], args, vectors, texts, pods=1, searches=per_class)[0]
            alone[c.name] = timings.warm.get(one.name, [])
            alone_steps[c.name] = timings.medians(one.name)
    for c in classes:
        cold = percentiles(crowd.cold.get(c.name, []))
        warm = percentiles(crowd.warm.get(c.name, []))
        entry: dict[str, Any] = {"cold": cold, "warm": warm}
        if args.trace_every:
            entry["steps_median_ms"] = crowd.medians(c.name)
            if alone is not None:
                entry["alone_steps_median_ms"] = alone_steps[c.name]
        if "p95" in cold and "p95" in warm:
            entry["cold_over_warm_p95"] = round(cold["p95"] / warm["p95"], 2)
        if alone is not None:
            entry["alone"] = percentiles(alone[c.name])
            if "p95" in entry["alone"] and "p95" in warm:
                entry["crowd_over_alone_p95"] = round(warm["p95"] / entry["alone"]["p95"], 2)
        report["classes"][c.name] = entry
        print(f"{c.name}: {json.dumps(entry)}", flush=True)
    report["load_average"] = os.getloadavg()
    print(f"resident MB: {memory}; load {report['load_average']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
