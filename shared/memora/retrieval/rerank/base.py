"""What a reranker is: a name a search asks for (`SearchParams.reranker`), a check that it can
run, made before any search work, and the scoring of one search's fused candidates."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from memora.retrieval.types import Candidate


class Reranker(Protocol):
    name: str  # as a search names it: "heuristic", "cross-encoder", "recall"

    def ready(self) -> None:
        """Loads what it needs, if anything (the cross-encoder's model): RerankerUnavailable
        when it cannot, before the search has done any work."""

    def rerank(self, query: str, candidates: Sequence[Candidate], reference: datetime) -> None:
        """Sets each candidate's `score` (higher is better), and whatever signal of its own
        the trace shows (the heuristic's `feedback`). `candidates` is never empty; relative
        dates resolve against `reference`."""
