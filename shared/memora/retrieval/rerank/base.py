"""What a reranker is: a name a search asks for (`SearchParams.reranker`), a check that it can
run, made before any search work, and the scoring of one search's fused candidates."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from memora.retrieval.types import Candidate


class Reranker(Protocol):
    name: str  # as a search names it: "heuristic", "cross-encoder", "recall"

    @property
    def backend(self) -> str | None:
        """What runs it, as the trace shows it: the cross-encoder's `torch`, `onnx` or
        `onnx-int8` once its model is loaded; None for a formula."""

    def ready(self) -> None:
        """Loads what it needs, if anything (the cross-encoder's model): RerankerUnavailable
        when it cannot, before the search has done any work."""

    def rerank(self, query: str, candidates: Sequence[Candidate], reference: datetime) -> None:
        """Sets each candidate's `score` (higher is better), and whatever signal of its own
        the trace shows (the heuristic's `feedback`). `candidates` is never empty; relative
        dates resolve against `reference`."""
