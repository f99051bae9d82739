"""The embedding model's forward pass on ONNX Runtime (CPU).

A sentence-transformers model of the usual shape (Transformer → Pooling → optional Normalize)
is exported once to ONNX and cached on disk under a key that hashes its weights
(`memora.nlp.onnx_export`); later processes load the file. A short query is embedded faster
than through torch (docs/benchmarks.md, "Query embedding"), because ONNX Runtime runs the
graph without Python-level dispatch per operator. Results match torch to
1e-6; the encoder checks that on probe sentences before it is used, and anything it cannot
reproduce raises `OnnxUnsupported` so the caller can keep torch.

With `int8_queries` the encoder also opens the model quantised to int8 (dynamic quantisation,
`onnx_export.quantized`) for `encode(..., queries=True)`: the query service's search queries,
embedded on every search's critical path (`bench/embedding.py`; docs/benchmarks.md, "Query
embedding"). Those vectors are compared with
stored ones and never stored themselves; memories stay fp32. The int8 session is used only
when its vectors of `QUERY_PROBES` are within `INT8_MIN_COSINE` of fp32's (seen: 0.983 at the
least, 0.993 median, over the 399 texts of memora/data/similarity_pairs.json); otherwise
queries stay fp32, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memora.nlp.onnx_export import OnnxUnsupported, exported, quantized, session

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

_POOLING = ("mean", "cls", "max")
_PROBES = ["What did Alice do last spring?", "Bob adopted a puppy in Lisbon after a long week."]
QUERY_PROBES = [
    *_PROBES,
    "When is Caroline's birthday?",
    "Which books has she recommended to her sister?",
    "Where did they go hiking in the summer of 2023?",
    "How does Mel feel about her new job at the hospital?",
    "The meeting moved to Thursday because the client was travelling.",
    "kids soccer practice",
]
INT8_MIN_COSINE = 0.97

log = logging.getLogger(__name__)


class OnnxEncoder:
    def __init__(
        self,
        model: SentenceTransformer,
        cache_dir: Path,
        threads: int = 1,
        *,
        int8_queries: bool = False,
    ) -> None:
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
        self.query_session = self.session
        self.query_precision = "fp32"
        if int8_queries:
            self._open_int8(path, threads)

    def _open_int8(self, path: Path, threads: int) -> None:
        try:
            candidate = session(quantized(path), threads)
            expected = normalised(self.encode(QUERY_PROBES))
            got = normalised(self._run(candidate, QUERY_PROBES))
        except Exception as exc:  # the quantiser's and ONNX Runtime's own errors vary
            log.warning("queries embedded in fp32: int8 model unavailable (%s)", exc)
            return
        worst = float(np.min(np.sum(expected * got, axis=1)))
        if worst < INT8_MIN_COSINE:
            log.warning(
                "queries embedded in fp32: int8 vectors differ from fp32 (cosine %.4f < %s)",
                worst, INT8_MIN_COSINE,
            )  # fmt: skip
            return
        self.query_session, self.query_precision = candidate, "int8"

    def encode(self, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
        """Pooled, not yet normalised, float32 vectors of one batch; `queries`: search queries,
        on the int8 session when it passed its check."""
        return self._run(self.query_session if queries else self.session, texts)

    def _run(self, run_on: Any, texts: Sequence[str]) -> np.ndarray:
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="np",
        )
        feeds = {name: batch[name].astype(np.int64) for name in self.inputs}
        hidden = run_on.run(None, feeds)[0]
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
