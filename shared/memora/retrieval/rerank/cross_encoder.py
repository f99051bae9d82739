"""The cross-encoder reranker (seed 000 §3.3.2): each candidate scored by the model on its
(query, "[Date: …] text") pair, a sigmoid in [0, 1]. The model and its serving (micro-batching,
ONNX Runtime or torch) are `cross_encoder_model`; it loads once, on first use."""

from __future__ import annotations

import gc
import threading
from collections.abc import Sequence
from datetime import datetime

from memora.basics.config import Settings
from memora.retrieval.rerank.cross_encoder_model import (
    CrossEncoderModel,
    PairScorer,
    RerankerUnavailable,
    ServingOptions,
    dated,
)
from memora.retrieval.types import Candidate


class CrossEncoderReranker:
    name = "cross-encoder"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._model: CrossEncoderModel | None = None
        self._error: RerankerUnavailable | None = None
        self._lock = threading.Lock()

    def model(self) -> PairScorer:
        """Loaded once, on first use (or at start with MEMORA_PRELOAD_CROSS_ENCODER); a model
        that could not load fails every later call at once, with the same error."""
        with self._lock:
            if self._model is None:
                if self._error is not None:
                    raise self._error
                try:
                    self._model = CrossEncoderModel(
                        self.settings.cross_encoder_model,
                        ServingOptions.from_settings(self.settings),
                    )
                except RerankerUnavailable as exc:
                    self._error = exc
                    raise
                gc.freeze()  # the model's objects, like the embedder's, are never garbage
            return self._model

    @property
    def backend(self) -> str | None:
        """The loaded model's backend (torch, onnx, onnx-int8); None before it loads."""
        return self._model.backend if self._model is not None else None

    def ready(self) -> None:
        self.model()

    def rerank(self, query: str, candidates: Sequence[Candidate], reference: datetime) -> None:
        passages = [dated(c.text, c.event_date) for c in candidates]
        for c, value in zip(candidates, self.model().score(query, passages), strict=True):
            c.score = float(value)

    def close(self) -> None:
        if self._model is not None:
            self._model.close()
