"""Rerankers (seed 000 §3.3, seed 002 §4.6): one module each, behind the `Reranker` protocol,
picked by the name a search asks for (`SearchParams.reranker`). A new one is a module here and
an entry in `Rerankers`."""

from __future__ import annotations

from memora.basics.config import Settings
from memora.retrieval.rerank.base import Reranker
from memora.retrieval.rerank.cross_encoder import CrossEncoderReranker
from memora.retrieval.rerank.heuristic import HeuristicReranker
from memora.retrieval.rerank.recall import RecallReranker

__all__ = ["CrossEncoderReranker", "HeuristicReranker", "RecallReranker", "Reranker", "Rerankers"]


class Rerankers:
    """A Retriever's rerankers, one of each, by name. The cross-encoder's model loads on first
    use and is closed with them."""

    def __init__(self, settings: Settings) -> None:
        self.cross_encoder = CrossEncoderReranker(settings)
        each: tuple[Reranker, ...] = (
            HeuristicReranker(settings),
            self.cross_encoder,
            RecallReranker(settings),
        )
        self._by_name = {r.name: r for r in each}

    def __getitem__(self, name: str) -> Reranker:
        return self._by_name[name]

    def close(self) -> None:
        self.cross_encoder.close()
