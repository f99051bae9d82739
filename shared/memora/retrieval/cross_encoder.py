"""Cross-encoder reranking (seed 000 §3.3.2): (query, "[Date: …] text") pairs scored by a
sentence-transformers CrossEncoder, logits squashed with a sigmoid to [0, 1].

Any CrossEncoder by name or local path (`MEMORA_CROSS_ENCODER_MODEL`; production:
cross-encoder/ms-marco-MiniLM-L-6-v2). On CUDA the model runs in fp16. Pairs are scored in
batches; callers cap the number of candidates (`MEMORA_RERANK_CANDIDATES`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import numpy as np

from memora.retrieval.scoring import sigmoid

os.environ.setdefault("HF_HUB_OFFLINE", "1")


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


class CrossEncoderReranker:
    def __init__(self, model: str, *, batch_size: int = 64, max_length: int = 256) -> None:
        import torch
        from sentence_transformers import CrossEncoder

        device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.model = CrossEncoder(model, device=device, max_length=max_length)
        except Exception as exc:  # causes vary (no such path, no network for a hub name)
            raise RerankerUnavailable(
                f"cannot load cross-encoder {model!r} (MEMORA_CROSS_ENCODER_MODEL): {exc}"
            ) from exc
        if device == "cuda":
            self.model.model.half()
        self.name, self.device, self.batch_size = model, device, batch_size
        self._identity = torch.nn.Identity()
        self._lock = threading.Lock()  # one forward pass at a time per process

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """sigmoid(logit) per passage, in [0, 1]."""
        if not passages:
            return np.zeros(0)
        with self._lock:
            logits = self.model.predict(
                [(query, p) for p in passages],
                batch_size=self.batch_size,
                activation_fn=self._identity,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return sigmoid(np.asarray(logits, dtype=np.float64).reshape(len(passages), -1)[:, 0])
