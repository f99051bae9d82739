"""The embedding model's forward pass on ONNX Runtime (CPU).

A sentence-transformers model of the usual shape (Transformer → Pooling → optional Normalize)
is exported once to ONNX and cached on disk under a key that hashes its weights
(`memora.nlp.onnx_export`); later processes load the file. On this project's 2-vCPU machine a
short query takes 3.1 ms instead of 9.1 ms through torch (docs/benchmarks.md), because ONNX
Runtime runs the graph without Python-level dispatch per operator. Results match torch to
1e-6; the encoder checks that on probe sentences before it is used, and anything it cannot
reproduce raises `OnnxUnsupported` so the caller can keep torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memora.nlp.onnx_export import OnnxUnsupported, exported, session

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

_POOLING = ("mean", "cls", "max")
_PROBES = ["What did Alice do last spring?", "Bob adopted a puppy in Lisbon after a long week."]


class OnnxEncoder:
    def __init__(self, model: SentenceTransformer, cache_dir: Path, threads: int = 1) -> None:
        modules = list(model)
        kinds = [type(m).__name__ for m in modules]
        if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"}:
            raise OnnxUnsupported(f"unsupported module chain {kinds}")
        self.pooling = str(getattr(modules[1], "pooling_mode", ""))
        if self.pooling not in _POOLING:
            raise OnnxUnsupported(f"unsupported pooling {self.pooling!r}")
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length or 512)
        self.inputs = list(self.tokenizer.model_input_names)
        path = exported(
            modules[0].auto_model, self.tokenizer, self.inputs, "last_hidden_state", cache_dir
        )
        self.session = session(path, threads)
        expected = model.encode(_PROBES, normalize_embeddings=True, convert_to_numpy=True)
        got = normalised(self.encode(_PROBES))
        if float(np.min(np.sum(expected * got, axis=1))) < 0.9999:
            raise OnnxUnsupported("ONNX Runtime results differ from torch's")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Pooled, not yet normalised, float32 vectors of one batch."""
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="np",
        )
        feeds = {name: batch[name].astype(np.int64) for name in self.inputs}
        hidden = self.session.run(None, feeds)[0]
        mask = batch["attention_mask"][..., None].astype(np.float32)
        if self.pooling == "cls":
            return np.asarray(hidden[:, 0], dtype=np.float32)
        if self.pooling == "max":
            return np.asarray(np.where(mask > 0, hidden, -1e9).max(axis=1), dtype=np.float32)
        return np.asarray((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))


def normalised(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    scaled: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return scaled
