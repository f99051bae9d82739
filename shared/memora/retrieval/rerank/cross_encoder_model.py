"""The cross-encoder's model and its serving (seed 000 §3.3.2): (query, "[Date: …] text") pairs
scored by a sentence-transformers CrossEncoder, logits squashed with a sigmoid to [0, 1]. The
reranker that uses it is `rerank/cross_encoder.py`.

Any CrossEncoder by name or local path (`MEMORA_CROSS_ENCODER_MODEL`; production:
cross-encoder/ms-marco-MiniLM-L-6-v2). The serving path (docs/retrieval.md):

- one model instance per process behind a `MicroBatcher`: concurrent searches queue their
  pairs and share forward passes (`MEMORA_CROSS_ENCODER_BATCH_WAIT_MS`);
- the pairs of a pass are tokenised once, without padding, sorted by length and cut into
  batches under a token budget, each padded to its own longest pair;
- the forward pass runs on torch in fp16 on CUDA, and on ONNX Runtime on a CPU: int8 by default
  (`auto`), fp32 when int8's ranking check fails or with `MEMORA_CROSS_ENCODER_BACKEND=onnx`;
  each is checked against torch's ranking on probe pairs when the model loads. Callers cap the
  candidates (`MEMORA_RERANK_CANDIDATES`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from memora.basics import metrics
from memora.basics.config import Settings
from memora.nlp.batching import MicroBatcher, length_batches, padded
from memora.nlp.onnx_export import OnnxUnsupported, default_cache_dir, exported, quantized, session
from memora.retrieval.scoring import sigmoid

os.environ.setdefault("HF_HUB_OFFLINE", "1")
log = logging.getLogger(__name__)
Backend = Literal["auto", "torch", "onnx", "onnx-int8"]
# int8 must rank the probe pairs as torch does with a Spearman correlation of at least this
# (check_ranking; what it means over 12 pairs: docs/retrieval.md, "Checked at load")
INT8_MIN_SPEARMAN = 0.9

# probe pairs for the load-time check: one question, passages from on-topic to unrelated
_PROBE_QUERY = "When did Caroline go to the LGBTQ support group?"
_PROBE_PASSAGES = [
    "[Date: May 08, 2023 (2023-05-08)] Caroline: I went to a LGBTQ support group yesterday.",
    "[Date: May 08, 2023 (2023-05-08)] Melanie: That sounds powerful, how did it feel?",
    "Caroline joined the support group in May.",
    "The support group meets every Sunday at the community center.",
    "[Date: June 27, 2023 (2023-06-27)] Melanie: We went camping with the kids last weekend.",
    "Bob adopted a puppy in Lisbon after a long week.",
    "The quarterly report is due on Friday.",
    "Caroline is researching adoption agencies.",
    "hi",
    "LGBTQ",
    "What did Alice do last spring? She planted tomatoes and learned the guitar.",
    "A very long passage about nothing in particular, " * 12,
]


class RerankerUnavailable(RuntimeError):
    """The cross-encoder could not be loaded (the query service answers 503)."""


class PairScorer(Protocol):
    """What a reranker backend does; an API-based reranker can stand in for the model."""

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray: ...


def dated(text: str, when: datetime | None) -> str:
    """`[Date: November 06, 2025 (2025-11-06)] text`, the input format of seed 000 §3.3.2."""
    if when is None:
        return text
    return f"[Date: {when.strftime('%B %d, %Y')} ({when.date().isoformat()})] {text}"


@dataclass(frozen=True)
class ServingOptions:
    backend: Backend = "auto"
    threads: int = 0  # ONNX Runtime intra-op threads; 0: one per core
    batch_size: int = 256  # pairs per forward pass at most
    batch_tokens: int = 0  # padded tokens per forward pass; 0: 2048 on a CPU, 32768 on CUDA
    batch_wait: float = 0.002  # seconds a pass waits for concurrent requests
    max_length: int = 256
    cache_dir: Path | None = None

    @classmethod
    def from_settings(cls, s: Settings) -> ServingOptions:
        """The MEMORA_CROSS_ENCODER_* settings."""
        return cls(
            backend=s.cross_encoder_backend,
            threads=s.cross_encoder_threads,
            batch_size=s.cross_encoder_batch_size,
            batch_tokens=s.cross_encoder_batch_tokens,
            batch_wait=s.cross_encoder_batch_wait_ms / 1000,
            max_length=s.cross_encoder_max_length,
            cache_dir=s.model_cache_dir,
        )


class CrossEncoderModel:
    """The model behind a micro-batching queue (see the module's doc): a `PairScorer`."""

    def __init__(self, model: str, options: ServingOptions | None = None) -> None:
        import torch
        from sentence_transformers import CrossEncoder

        o = options or ServingOptions()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.model = CrossEncoder(model, device=device, max_length=o.max_length)
        except Exception as exc:  # causes vary (no such path, no network for a hub name)
            raise RerankerUnavailable(
                f"cannot load cross-encoder {model!r} (MEMORA_CROSS_ENCODER_MODEL): {exc}"
            ) from exc
        if o.batch_tokens <= 0:  # a CPU is compute-bound: smaller buckets waste less padding
            o = replace(o, batch_tokens=2048 if device == "cpu" else 32768)
        self.name, self.device, self.options = model, device, o
        self.tokenizer = self.model.tokenizer
        self.inputs = list(self.tokenizer.model_input_names)
        self.pad_values = {"input_ids": int(self.tokenizer.pad_token_id or 0)}
        self.passes = 0  # forward passes run so far
        # a plain sequence classifier is run directly; other chains (e.g. a generative
        # reranker's logit head) keep sentence-transformers' predict
        self._direct = [type(m).__name__ for m in self.model] == ["Transformer"]
        self._onnx: Any = None
        self.backend: str = "torch"  # what serves the forward passes: torch, onnx, onnx-int8
        self.check = ""  # how the backend's ranking check at load went, for the log
        if o.backend in ("onnx", "onnx-int8") or (o.backend == "auto" and device == "cpu"):
            self._onnx = self._load_onnx()
        if self._onnx is not None:
            self.model.model.to("meta")  # torch's copy of the weights is no longer read
        elif device == "cuda":
            self.model.model.half()
            self.check = "fp16"
        log.info(
            "cross-encoder %s on %s: backend %s (%s; MEMORA_CROSS_ENCODER_BACKEND=%s)",
            model, device, self.backend, self.check or "no check", o.backend,
        )  # fmt: skip
        metrics.record_cross_encoder(model, self.backend)
        self._batcher: MicroBatcher[tuple[str, str]] = MicroBatcher(
            self._logits,
            max_wait=o.batch_wait,
            max_items=4 * o.batch_size,
            name="memora-cross-encoder",
        )

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """sigmoid(logit) per passage, in [0, 1]."""
        if not passages:
            return np.zeros(0)
        logits = self._batcher.submit([(query, p) for p in passages])
        return sigmoid(np.asarray(logits, dtype=np.float64))

    @property
    def rounds(self) -> int:
        """Rounds of the batching queue so far (each runs one or more forward passes)."""
        return self._batcher.calls

    def close(self) -> None:
        self._batcher.close()

    # ------------------------------------------------------------------ forward passes
    def _logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """The first logit of each pair, in the pairs' order (the batcher's worker thread)."""
        if not self._direct:
            self.passes += 1
            return self._predict(pairs)
        encoded = self.tokenize(pairs)
        out = np.empty(len(pairs), dtype=np.float32)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        for rows in length_batches(lengths, self.options.batch_tokens, self.options.batch_size):
            out[rows] = self.forward(padded(encoded, rows, self.pad_values))
            self.passes += 1
        return out

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> dict[str, list[list[int]]]:
        """The model's inputs for each pair, unpadded (truncated as CrossEncoder.predict does)."""
        encoded = self.tokenizer(
            [q for q, _ in pairs],
            [p for _, p in pairs],
            truncation=True,
            max_length=self.options.max_length,
        )
        return {name: encoded[name] for name in self.inputs}

    def forward(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The first logit of each row of one padded batch (`padded`'s arrays)."""
        if self._onnx is not None:
            return np.asarray(self._onnx.run(None, feeds)[0], dtype=np.float32)[:, 0]
        import torch

        with torch.inference_mode():
            tensors = {k: torch.from_numpy(v).to(self.device) for k, v in feeds.items()}
            logits = self.model.model(**tensors).logits
            return np.asarray(logits[:, 0].float().cpu().numpy())

    def _predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        import torch

        logits = self.model.predict(
            pairs,
            batch_size=self.options.batch_size,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(logits, dtype=np.float32).reshape(len(pairs), -1)[:, 0]

    # ------------------------------------------------------------------ ONNX Runtime
    def _load_onnx(self) -> Any:
        """The ONNX Runtime session whose ranking check passes; `auto` tries int8 first, then
        fp32 (logged), then keeps torch (None, logged)."""
        o = self.options
        kinds: list[Backend] = ["onnx-int8", "onnx"] if o.backend == "auto" else [o.backend]
        try:
            if not self._direct:
                chain = [type(m).__name__ for m in self.model]
                raise OnnxUnsupported(f"unsupported module chain {chain}")
            expected = self._logits(self._probes())  # torch, before any session exists
            path = exported(
                self.model.model, self.tokenizer, self.inputs, "logits",
                o.cache_dir or default_cache_dir(),
            )  # fmt: skip
            for kind in kinds[:-1]:
                try:
                    return self._checked_session(kind, path, expected)
                except Exception as exc:  # OnnxUnsupported, the quantiser's own errors
                    log.warning(
                        "cross-encoder %s: %s refused at load (%s); serving ONNX Runtime fp32 "
                        "instead, about twice as slow on a CPU (MEMORA_CROSS_ENCODER_BACKEND="
                        "onnx skips the int8 attempt)", self.name, kind, exc,
                    )  # fmt: skip
            return self._checked_session(kinds[-1], path, expected)
        except Exception as exc:  # ImportError, OnnxUnsupported, ONNX Runtime's own errors
            self._onnx = None
            if o.backend != "auto":
                raise RerankerUnavailable(
                    f"cannot run cross-encoder {self.name!r} on ONNX Runtime "
                    f"(MEMORA_CROSS_ENCODER_BACKEND={o.backend}): {exc}"
                ) from exc
            log.warning("cross-encoder on torch: ONNX Runtime unavailable for it (%s)", exc)
            return None
        finally:
            self.passes = 0

    def _checked_session(self, kind: Backend, path: Path, expected: np.ndarray) -> Any:
        """A session of the exported model (`kind` onnx-int8: quantised) whose logits on the
        probe pairs pass check_ranking against torch's (`expected`); it becomes the backend."""
        self._onnx = session(
            quantized(path) if kind == "onnx-int8" else path,
            self.options.threads or os.cpu_count() or 1,
            spinning=False,
        )
        try:
            self.check = check_ranking(
                expected, self._logits(self._probes()), int8=kind == "onnx-int8"
            )
        except Exception:
            self._onnx = None
            raise
        self.backend = kind
        return self._onnx

    def _probes(self) -> list[tuple[str, str]]:
        return [(_PROBE_QUERY, p) for p in _PROBE_PASSAGES]


def check_ranking(expected: np.ndarray, got: np.ndarray, *, int8: bool) -> str:
    """ONNX Runtime's logits against torch's on the probe pairs: fp32 within 1e-3 (so the
    ranking is torch's up to near-ties), int8 with a Spearman rank correlation of at least
    INT8_MIN_SPEARMAN (its rounding reorders pairs whose scores are close). Returns what was
    found, for the log; OnnxUnsupported when the check fails."""
    from scipy.stats import spearmanr

    if int8:
        rho = float(spearmanr(expected, got).statistic)
        found = f"Spearman {rho:.3f} over {len(expected)} probe pairs, at least {INT8_MIN_SPEARMAN}"
        if not rho >= INT8_MIN_SPEARMAN:
            raise OnnxUnsupported(f"int8 ranking differs from torch's ({found} needed)")
        return f"int8 ranking check passed: {found}"
    gap = float(np.max(np.abs(expected - got)))
    if gap > 1e-3 * max(1.0, float(np.max(np.abs(expected)))):
        raise OnnxUnsupported(f"ONNX Runtime logits differ from torch's by up to {gap:.2e}")
    return f"fp32 check passed (logits within {gap:.1e} of torch's)"
