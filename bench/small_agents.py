"""Search latency of small agents of real chat text (issue 55): the LoCoMo conversations, one
agent each (about 400 turns), searched right after their ingest and again once their tables
are analysed, each question on the query service and through the write API.

    python bench/small_agents.py                        # dev split, top 50 and top 10
    python bench/small_agents.py --top-k 10 --rounds 3
    python bench/small_agents.py --crowd 300x400        # among 300 other agents

An embedded stack in a new data folder (`common.embedded_stack`: the tables' statistics as
fresh as a new deployment's), the conversations posted as `bench/locomo.py` posts them, and as
soon as every operation has completed, `--rounds` passes over the questions for each
`--top-k`: each question sent to the query service and through the write API's forwarding,
which one first alternating, back to back (the first pass warms the processes and is not
counted). Then `ANALYZE` of the database and the same again. Reported per phase: p50 / p95 /
p99 over HTTP on each side, the forwarding hop (the median of the per-question differences),
and the stages' medians from a traced pass on the query service.

`--crowd COUNTxMEMORIES` first loads that many synthetic agents (as `bench/many_agents.py`
loads a size class, its HNSW index built and the tables analysed), so the conversations arrive
in a database of many agents, as on a platform; each timed question is then preceded by an
untimed search of a crowd agent drawn at random, so the processes and the database serve many
agents, most of them cold.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import locomo  # bench/locomo.py
from common import embedded_stack
from many_agents import SizeClass, load_classes
from search_latency import questions as crowd_questions
from search_latency import sentence_pool

from memora.basics.config import Settings
from memora.nlp.embedding import Embedder
from memora_client import MemoraClient


def percentiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {f"p{p}": round(cuts[p - 1], 1) for p in (50, 95, 99)}


class Crowd:
    """Untimed searches of other agents, one before each timed question."""

    def __init__(self, agents: list[str], seed: int = 11) -> None:
        self.agents, self.rng = agents, random.Random(seed)
        self.questions = crowd_questions(500) if agents else []

    def search(self, client: httpx.Client) -> None:
        if self.agents:
            body = {
                "agent_id": self.rng.choice(self.agents),
                "query": self.rng.choice(self.questions),
            }
            client.post("/api/search", json=body).raise_for_status()


def load_crowd(url: str, shape: str) -> list[str]:
    """The synthetic agents of `shape` (COUNTxMEMORIES), loaded and analysed."""
    crowd = SizeClass.parse(shape)
    texts = sentence_pool(random.Random(7), 3000)
    vectors = Embedder(Settings().embedding_model, torch_threads=2).embed(texts)
    load_classes(url, [crowd], vectors, texts)
    return crowd.agents()


def measure(
    sides: dict[str, httpx.Client],
    questions: list[locomo.Question],
    top_k: int,
    rounds: int,
    crowd: Crowd,
) -> dict[str, Any]:
    """Each question on both sides (which first alternating), `rounds` passes, the first not
    counted; then one traced pass on the query service for the stages."""
    latency: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(rounds):
        for i, q in enumerate(questions):
            crowd.search(sides["query service"])
            body = {
                "agent_id": q.agent_id, "query": q.text, "top_k": top_k,
                "reference_time": q.reference.isoformat(),
            }  # fmt: skip
            order = list(sides) if (i + round_) % 2 == 0 else list(sides)[::-1]
            for name in order:
                started = time.perf_counter()
                sides[name].post("/api/search", json=body).raise_for_status()
                if round_ > 0:
                    latency[name].append((time.perf_counter() - started) * 1000)
    stages: dict[str, list[float]] = {}
    for q in questions:
        body = {
            "agent_id": q.agent_id, "query": q.text, "top_k": top_k, "trace": True,
            "reference_time": q.reference.isoformat(),
        }  # fmt: skip
        trace = sides["query service"].post("/api/search", json=body).json()["trace"]
        for stage, ms in trace["timings_ms"].items():
            if isinstance(ms, int | float):
                stages.setdefault(stage, []).append(ms)
        for arm, path in (trace.get("paths") or {}).items():
            if path.get("ran", True) and isinstance(path.get("ms"), int | float):
                stages.setdefault(f"retriever {arm}", []).append(path["ms"])
    hop = [b - a for a, b in zip(latency["query service"], latency["write API"], strict=True)]
    return {
        **{name: percentiles(values) for name, values in latency.items()},
        "hop_ms": round(statistics.median(hop), 2),
        "stages_ms": {k: round(statistics.median(v), 1) for k, v in stages.items()},
    }


def show(phase: str, top_k: int, found: dict[str, Any]) -> None:
    sides = ", ".join(
        f"{name} p50 / p95 / p99 {found[name]['p50']} / {found[name]['p95']} / {found[name]['p99']}"
        for name in ("query service", "write API")
    )
    print(f"{phase}, top {top_k}: {sides} ms; hop {found['hop_ms']} ms", flush=True)
    print("  stages (median ms): " + ", ".join(f"{k} {v}" for k, v in found["stages_ms"].items()))


def main() -> None:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=here.parent.parent / "shared/locomo/locomo_dev.json"
    )
    parser.add_argument("--top-k", type=int, nargs="+", default=[50, 10])
    parser.add_argument("--rounds", type=int, default=2, help="passes, the first not counted")
    parser.add_argument("--crowd", metavar="COUNTxMEMORIES", help="other agents loaded first")
    parser.add_argument("--out", type=Path, default=here / "results" / "small_agents.json")
    args = parser.parse_args()

    questions = locomo.load_questions(json.loads(args.data.read_text()), "locomo-")
    report: dict[str, Any] = {"data": str(args.data), "questions": len(questions)}
    with embedded_stack(with_query=True) as stack:
        crowd = Crowd(load_crowd(stack.database_url, args.crowd) if args.crowd else [])
        report["crowd"] = args.crowd
        with MemoraClient(stack.url, timeout=120, max_retries=0) as client:
            items, seconds = locomo.ingest(client, args.data, "locomo-")
        print(f"ingested {items} turns in {seconds:.1f} s", flush=True)
        sides = {
            "query service": httpx.Client(base_url=stack.query_url, timeout=60),
            "write API": httpx.Client(base_url=stack.url, timeout=60),
        }
        for phase in ("right after the ingest", "analysed"):
            if phase == "analysed":
                with psycopg.connect(stack.database_url, autocommit=True) as conn:
                    conn.execute("ANALYZE")
            for top_k in args.top_k:
                found = measure(sides, questions, top_k, args.rounds, crowd)
                report[f"{phase}, top {top_k}"] = found
                show(phase, top_k, found)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
