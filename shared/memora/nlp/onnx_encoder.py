"""The embedding model's forward pass on ONNX Runtime (CPU).

A sentence-transformers model of the usual shape (Transformer → Pooling → optional Normalize)
is exported once to ONNX and cached on disk under a key that hashes its weights
(`memora.nlp.onnx_export`); later processes load the file, and those that find the check's
record (`memora.nlp.onnx_record`) open it without loading torch at all. A short query is
embedded faster than through torch (docs/benchmarks.md, "Query embedding"), because ONNX
Runtime runs the graph without Python-level dispatch per operator. Results match torch to
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

from memora.nlp import onnx_record
from memora.nlp.onnx_export import OnnxUnsupported, exported, quantized, session
from memora.nlp.onnx_record import OnnxRecord

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

_POOLING = ("mean", "cls", "max")
# The model's input names and what `tokenizers` calls each in an encoding.
_FIELDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
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
    """`OnnxEncoder(model, ...)` exports a loaded sentence-transformers model and checks it
    against torch; `OnnxEncoder.recorded(...)` opens what such a check recorded, without torch
    (`memora.nlp.onnx_record`)."""

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
        pooling = str(getattr(modules[1], "pooling_mode", ""))
        if pooling not in _POOLING:
            raise OnnxUnsupported(f"unsupported pooling {pooling!r}")
        inputs = list(model.tokenizer.model_input_names)
        if set(inputs) - set(_FIELDS):
            raise OnnxUnsupported(f"unsupported model inputs {inputs}")
        path = exported(
            modules[0].auto_model, model.tokenizer, inputs, "last_hidden_state", cache_dir
        )
        tokenizer = _batch_tokenizer(model.tokenizer, int(model.max_seq_length or 512))
        self._open(path, tokenizer, inputs, pooling, threads)
        expected = model.encode(_PROBES, normalize_embeddings=True, convert_to_numpy=True)
        self._check(expected)
        self.record = OnnxRecord(
            str(path), tokenizer.to_str(), inputs, pooling, int(expected.shape[1]),
            expected.tolist(),
        )  # fmt: skip
        self._queries(path, threads, int8_queries)

    @classmethod
    def recorded(
        cls, model_dir: Path, cache_dir: Path, threads: int = 1, *, int8_queries: bool = False
    ) -> OnnxEncoder | None:
        """The encoder a previous check recorded for this model directory; None when there is
        no record or its export no longer gives the recorded vectors."""
        from tokenizers import Tokenizer

        record = onnx_record.read(model_dir, cache_dir)
        if record is None:
            return None
        encoder = cls.__new__(cls)
        try:
            tokenizer = Tokenizer.from_str(record.tokenizer)
            encoder._open(Path(record.model), tokenizer, record.inputs, record.pooling, threads)
            encoder._check(record.expected)
        except Exception as exc:  # a changed runtime or tokenizers: export and check again
            log.warning("ONNX record of %s not used: %s", model_dir, exc)
            return None
        encoder.record = record
        encoder._queries(Path(record.model), threads, int8_queries)
        return encoder

    def _open(
        self, path: Path, tokenizer: Tokenizer, inputs: list[str], pooling: str, threads: int
    ) -> None:
        self.session = session(path, threads)
        self.tokenizer, self.inputs, self.pooling = tokenizer, inputs, pooling
        self.counter = tokenizer.__class__.from_str(tokenizer.to_str())  # whole texts
        self.counter.no_padding()
        self.counter.no_truncation()

    def _check(self, expected: np.ndarray) -> None:
        got = normalised(self._run(self.session, _PROBES))
        if float(np.min(np.sum(expected * got, axis=1))) < 0.9999:
            raise OnnxUnsupported("ONNX Runtime results differ from torch's")

    def _queries(self, path: Path, threads: int, int8_queries: bool) -> None:
        self.query_session = self.session
        self.query_precision = "fp32"
        if int8_queries:
            self._open_int8(path, threads)

    @property
    def dim(self) -> int:
        return self.record.dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, whole, without special tokens."""
        encodings = self.counter.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

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
        encodings = self.tokenizer.encode_batch(list(texts))
        feeds = {
            name: np.array([getattr(e, _FIELDS[name]) for e in encodings], dtype=np.int64)
            for name in self.inputs
        }
        hidden = run_on.run(None, feeds)[0]
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)[..., None]
        if self.pooling == "cls":
            return np.asarray(hidden[:, 0], dtype=np.float32)
        if self.pooling == "max":
            return np.asarray(np.where(mask > 0, hidden, -1e9).max(axis=1), dtype=np.float32)
        return np.asarray((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))


def _batch_tokenizer(tokenizer: Any, max_length: int) -> Tokenizer:
    """The model's fast tokenizer as the encoder calls it: padded to the longest text of a
    batch, truncated to the model's sequence length (the file's own settings replaced)."""
    from tokenizers import Tokenizer

    if not getattr(tokenizer, "is_fast", False):
        raise OnnxUnsupported("the model has no fast tokenizer")
    batch = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    batch.no_padding()
    batch.enable_padding(
        direction=tokenizer.padding_side, pad_id=tokenizer.pad_token_id or 0,
        pad_type_id=tokenizer.pad_token_type_id, pad_token=tokenizer.pad_token or "[PAD]",
    )  # fmt: skip
    batch.enable_truncation(max_length, direction=tokenizer.truncation_side)
    return batch


def normalised(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    scaled: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return scaled
