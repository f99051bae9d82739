"""The embedding model on ONNX Runtime gives torch's vectors, is exported once per model,
and anything it cannot run falls back to torch (auto) or fails clearly (onnx)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memora.basics.config import DEFAULT_EMBEDDING_MODEL
from memora.nlp import onnx_encoder, onnx_export
from memora.nlp.embedding import Embedder, resolve_model_path

TEXTS = [
    "What did Alice do last spring?",
    "hi",
    "Bob repaired his old bicycle in the garage after a long week of rain, " * 20,  # > 256
    "Café crème, naïve résumé — ünïcödé 🙂",
]


@pytest.fixture(scope="module")
def torch_embedder() -> Embedder:
    return Embedder(DEFAULT_EMBEDDING_MODEL, backend="torch")


def test_onnx_vectors_equal_torch_vectors(torch_embedder: Embedder, tmp_path: Path) -> None:
    onnx = Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path)
    assert (onnx.backend, torch_embedder.backend) == ("onnx", "torch")
    # torch's copy of the weights is released once ONNX Runtime serves the model
    assert next(onnx.model[0].auto_model.parameters()).device.type == "meta"
    got, expected = onnx.embed(TEXTS), torch_embedder.embed(TEXTS)
    assert got.shape == expected.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # one text at a time (the query path) gives the same as a padded batch
    np.testing.assert_allclose(onnx.embed([TEXTS[1]])[0], got[1], atol=1e-5)


def test_the_export_is_cached_and_reused(tmp_path: Path) -> None:
    Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path)
    (exported,) = tmp_path.glob("*.onnx")
    (record,) = tmp_path.glob("record-*.json")
    stamp = exported.stat().st_mtime_ns
    again = Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path)
    assert again.backend == "onnx"
    # no second file, no partial left behind
    assert sorted(tmp_path.iterdir()) == sorted([exported, record])
    assert exported.stat().st_mtime_ns == stamp


# A process that finds the check's record embeds without importing torch, as torch would.
_RECORDED = """
import json, sys
from pathlib import Path
from memora.nlp.embedding import Embedder, resolve_model_path
embedder = Embedder(sys.argv[1], cache_dir=Path(sys.argv[2]), int8_queries=True)
texts = json.loads(sys.argv[3])
print(json.dumps({
    "backend": embedder.backend, "queries": embedder.query_precision,
    "torch": "torch" in sys.modules,
    "sentence_transformers": "sentence_transformers" in sys.modules,
    "vectors": embedder.embed(texts).tolist(), "tokens": embedder.count_tokens(texts),
}))
"""


def test_a_recorded_export_serves_later_processes_without_torch(
    torch_embedder: Embedder, tmp_path: Path
) -> None:
    Embedder(DEFAULT_EMBEDDING_MODEL, cache_dir=tmp_path, int8_queries=True)  # checks, records
    script = [sys.executable, "-c", _RECORDED, DEFAULT_EMBEDDING_MODEL, str(tmp_path)]
    ran = subprocess.run([*script, json.dumps(TEXTS)], capture_output=True, text=True, check=True)
    got = json.loads(ran.stdout)
    assert (got["backend"], got["queries"]) == ("onnx", "int8")
    assert not got["torch"] and not got["sentence_transformers"], ran.stderr
    np.testing.assert_allclose(np.array(got["vectors"]), torch_embedder.embed(TEXTS), atol=1e-5)
    assert got["tokens"] == torch_embedder.count_tokens(TEXTS)
    assert got["tokens"][2] > 256  # counted whole: the long text is not truncated


def test_a_record_that_no_longer_holds_is_checked_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = Embedder(DEFAULT_EMBEDDING_MODEL, cache_dir=tmp_path)
    assert first.model is not None  # no record yet: loaded through sentence-transformers
    assert Embedder(DEFAULT_EMBEDDING_MODEL, cache_dir=tmp_path).model is None  # the record
    (path,) = tmp_path.glob("record-*.json")
    record = json.loads(path.read_text())
    record["probes"] = [[-x for x in probe] for probe in record["probes"]]
    path.write_text(json.dumps(record))
    again = Embedder(DEFAULT_EMBEDDING_MODEL, cache_dir=tmp_path)
    assert again.model is not None and again.backend == "onnx"
    assert "ONNX record" in caplog.text and "not used" in caplog.text
    rewritten = np.array(json.loads(path.read_text())["probes"])  # torch's vectors again
    np.testing.assert_allclose(rewritten, first.embed(onnx_encoder._PROBES), atol=1e-5)


def test_a_changed_model_directory_is_not_served_by_an_old_record(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(resolve_model_path(DEFAULT_EMBEDDING_MODEL), model)
    cache = tmp_path / "cache"
    Embedder(str(model), cache_dir=cache)
    assert Embedder(str(model), cache_dir=cache).model is None
    (model / "README.md").write_text("changed")
    assert Embedder(str(model), cache_dir=cache).model is not None
    assert len(list(cache.glob("record-*.json"))) == 2


def test_an_unsupported_model_falls_back_or_fails_clearly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class Refusing(onnx_encoder.OnnxEncoder):
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise onnx_export.OnnxUnsupported("unsupported module chain ['Transformer', 'Dense']")

    monkeypatch.setattr("memora.nlp.embedding.OnnxEncoder", Refusing)
    fallback = Embedder(DEFAULT_EMBEDDING_MODEL, backend="auto", cache_dir=tmp_path)
    assert fallback.backend == "torch"
    assert fallback.embed(["still works"]).shape == (1, 384)
    with pytest.raises(RuntimeError, match=r"MEMORA_EMBEDDING_BACKEND=onnx.*Dense"):
        Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path)


def test_a_model_of_another_shape_is_refused(torch_embedder: Embedder, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    modules = list(torch_embedder.model)
    no_pooling = SentenceTransformer(modules=[modules[0]], device="cpu")
    with pytest.raises(onnx_export.OnnxUnsupported, match="module chain"):
        onnx_encoder.OnnxEncoder(no_pooling, tmp_path)


def test_micro_batched_queries_share_passes_and_get_their_own_vectors(tmp_path: Path) -> None:
    # on CUDA the query service batches concurrent queries; the same path runs on the CPU here
    embedder = Embedder(
        DEFAULT_EMBEDDING_MODEL, cache_dir=tmp_path, micro_batch=True, batch_wait=0.5
    )
    alone = [embedder.embed([t]) for t in TEXTS]
    passes = embedder.passes
    barrier = threading.Barrier(len(TEXTS))

    def together(text: str) -> np.ndarray:
        barrier.wait()
        return embedder.embed([text])

    with ThreadPoolExecutor(len(TEXTS)) as pool:
        shared = list(pool.map(together, TEXTS))
    for mine, theirs in zip(shared, alone, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert embedder.passes - passes <= 2 < len(TEXTS)  # one or two shared encode calls


def _pairs() -> list[dict[str, str]]:
    path = Path(onnx_encoder.__file__).parent.parent / "data" / "similarity_pairs.json"
    items: list[dict[str, str]] = json.loads(path.read_text())["items"]
    return items


def test_int8_queries_rank_as_fp32_and_memories_stay_fp32(
    torch_embedder: Embedder, tmp_path: Path
) -> None:
    embedder = Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path,
                        int8_queries=True)  # fmt: skip
    assert embedder.query_precision == "int8"
    assert len(list(tmp_path.glob("*.int8.onnx"))) == 1  # quantised once, beside the export
    # memories (embed) are fp32, torch's vectors
    np.testing.assert_allclose(embedder.embed(TEXTS), torch_embedder.embed(TEXTS), atol=1e-5)
    queries, memories = embedder.embed_queries(TEXTS), embedder.embed(TEXTS)
    cosine = np.sum(queries * memories, axis=1)
    assert cosine.min() >= onnx_encoder.INT8_MIN_COSINE and cosine.max() < 1 - 1e-6
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-6)
    # a related message ranks above an unrelated one for the same queries as with fp32
    pairs = _pairs()
    related = embedder.embed([p["related"] for p in pairs])
    unrelated = embedder.embed([p["unrelated"] for p in pairs])
    asked = [p["query"] for p in pairs]
    margins = [
        np.sum(v * related, axis=1) - np.sum(v * unrelated, axis=1)
        for v in (embedder.embed(asked), embedder.embed_queries(asked))
    ]
    agree = float(np.mean((margins[0] > 0) == (margins[1] > 0)))
    assert agree >= 0.98, agree


def test_int8_queries_fall_back_to_fp32_when_their_check_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(onnx_encoder, "INT8_MIN_COSINE", 1.01)  # no int8 vector is that close
    embedder = Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path,
                        int8_queries=True)  # fmt: skip
    assert embedder.query_precision == "fp32"
    assert "queries embedded in fp32: int8 vectors differ" in caplog.text
    np.testing.assert_array_equal(embedder.embed_queries(TEXTS), embedder.embed(TEXTS))


def test_queries_are_fp32_unless_asked(tmp_path: Path) -> None:
    embedder = Embedder(DEFAULT_EMBEDDING_MODEL, backend="onnx", cache_dir=tmp_path)
    assert embedder.query_precision == "fp32"
    assert not list(tmp_path.glob("*.int8.onnx"))
    np.testing.assert_array_equal(embedder.embed_queries(TEXTS), embedder.embed(TEXTS))
