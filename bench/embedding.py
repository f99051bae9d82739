"""Query-embedding latency and batch throughput of the embedding model, torch against ONNX
Runtime (`MEMORA_EMBEDDING_BACKEND`), and the query service's int8 queries
(`MEMORA_QUERY_EMBEDDING_INT8`) against fp32, in one process on the CPU.

    python bench/embedding.py                       # 1 thread, the service's default
    python bench/embedding.py --threads 2

Queries are the latency benchmark's natural-language questions, embedded one at a time (the
query path), and as a search does, with a second text (the query without a name); the batch
figure embeds the LoCoMo dev turns in the workers' batch size. Reports p50/p95 per query,
texts per second, the largest difference between the two backends' vectors, and the cosine of
int8 query vectors to fp32's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from search_latency import questions

from memora.basics.config import DEFAULT_EMBEDDING_MODEL
from memora.nlp.embedding import Embedder

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo_dev.json"


def turns(path: Path, limit: int) -> list[str]:
    data = json.loads(path.read_text())
    out: list[str] = []
    for conversation in data:
        sessions = conversation["conversation"]
        for key, value in sessions.items():
            if key.startswith("session_") and isinstance(value, list):
                out.extend(f"{t['speaker']}: {t['text']}" for t in value)
    return out[:limit]


def query_times(
    embed: Callable[[list[str]], np.ndarray], queries: list[str], texts: int
) -> list[float]:
    """ms per call of `texts` texts: the query, then itself without its first word."""
    for q in queries[:20]:
        embed([q])
    times = []
    for q in queries[20:]:
        batch = [q, q.split(" ", 1)[-1]][:texts]
        started = time.perf_counter()
        embed(batch)
        times.append((time.perf_counter() - started) * 1000)
    return times


def measure(embedder: Embedder, queries: list[str], batch: list[str]) -> dict[str, Any]:
    times = query_times(embedder.embed, queries, 1)
    started = time.perf_counter()
    embedder.embed(batch)
    elapsed = time.perf_counter() - started
    return {
        "query_p50_ms": round(statistics.median(times), 2),
        "query_p95_ms": round(float(np.percentile(times, 95)), 2),
        "batch_texts_per_s": round(len(batch) / elapsed, 1),
    }


def int8_queries(embedder: Embedder, queries: list[str]) -> dict[str, Any]:
    """The query service's path: fp32 (`embed`) against int8 (`embed_queries`), one and two
    texts per call, and how close int8's vectors are to fp32's."""
    out: dict[str, Any] = {"query_precision": embedder.query_precision}
    for name, embed in (("fp32", embedder.embed), ("int8", embedder.embed_queries)):
        for texts in (1, 2):
            times = query_times(embed, queries, texts)
            out[f"{name}_{texts}_text_p50_ms"] = round(statistics.median(times), 2)
    cosine = np.sum(embedder.embed(queries) * embedder.embed_queries(queries), axis=1)
    out["int8_cosine_min"] = round(float(cosine.min()), 4)
    out["int8_cosine_median"] = round(float(np.median(cosine)), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch-texts", type=int, default=800)
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args()
    queries = questions(args.queries + 20)
    batch = turns(args.locomo, args.batch_texts)
    report: dict[str, Any] = {"threads": args.threads, "batch_texts": len(batch)}
    vectors = {}
    cache = Path(tempfile.mkdtemp(prefix="memora-onnx-bench-"))
    for backend in ("torch", "onnx"):
        embedder = Embedder(
            DEFAULT_EMBEDDING_MODEL, torch_threads=args.threads, backend=backend, cache_dir=cache
        )
        report[backend] = measure(embedder, queries, batch)
        vectors[backend] = embedder.embed(batch[:200])
        print(backend, report[backend], flush=True)
    report["max_abs_difference"] = float(np.abs(vectors["torch"] - vectors["onnx"]).max())
    embedder = Embedder(
        DEFAULT_EMBEDDING_MODEL, torch_threads=args.threads, backend="onnx", cache_dir=cache,
        int8_queries=True,
    )  # fmt: skip
    report["queries"] = int8_queries(embedder, queries)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
