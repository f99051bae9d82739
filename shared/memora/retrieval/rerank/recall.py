"""The recall reranker (seed 002 §4.6, memora.lifecycle's recall): relevance, recency as an
exponential decay since the last access, importance and log-scaled frequency. The score is
pure functions over arrays, unit-tested apart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from memora.basics.config import Settings
from memora.retrieval.types import Candidate

MAX_IMPORTANCE = 10.0  # importance is on a 1–10 scale (memora.lifecycle)


class RecallReranker:
    name = "recall"
    backend = None  # a formula

    def __init__(self, settings: Settings) -> None:
        self.weights = RecallWeights.from_settings(settings)

    def ready(self) -> None:
        """Nothing to load."""

    def rerank(self, query: str, candidates: Sequence[Candidate], reference: datetime) -> None:
        w = self.weights
        scores = recall_scores(
            np.array([c.semantic for c in candidates]),
            np.array([recency_decay(c.last_used or c.event_date, reference,
                                    w.recency_half_life_days) for c in candidates]),
            np.array([c.importance for c in candidates]),
            np.array([frequency_score(c.access_count, w.max_access) for c in candidates]),
            w,
        )  # fmt: skip
        for c, value in zip(candidates, scores, strict=True):
            c.score = float(value)


@dataclass(frozen=True)
class RecallWeights:
    """score = relevance·0.4 + recency·0.2 + importance·0.3 + frequency·0.1 (seed 002 §4.6)."""

    relevance: float = 0.4
    recency: float = 0.2
    importance: float = 0.3
    frequency: float = 0.1
    recency_half_life_days: float = 7.0  # seed 002 §4.9 decay.recencyHalfLife
    max_access: int = 100  # frequency = log(1 + count) / log(1 + max_access), at most 1

    @classmethod
    def from_settings(cls, s: Settings) -> RecallWeights:
        return cls(
            s.recall_relevance_weight,
            s.recall_recency_weight,
            s.recall_importance_weight,
            s.recall_frequency_weight,
            s.recall_recency_half_life_days,
        )


def recency_decay(last_access: datetime, now: datetime, half_life_days: float) -> float:
    """exp(−ln 2 · days since the last access / half-life): 1 just accessed, ½ a half-life ago."""
    days = max(0.0, (now - last_access).total_seconds() / 86400.0)
    return math.exp(-math.log(2.0) * days / max(half_life_days, 1e-9))


def frequency_score(access_count: int, max_access: int) -> float:
    return min(1.0, math.log1p(max(0, access_count)) / math.log1p(max(1, max_access)))


def recall_scores(
    relevance: np.ndarray,
    recency: np.ndarray,
    importance: np.ndarray,
    frequency: np.ndarray,
    w: RecallWeights,
) -> np.ndarray:
    """Relevance (cosine similarity, clipped to [0, 1]), recency and frequency in [0, 1],
    importance on its 1–10 scale (divided by 10 here)."""
    score: np.ndarray = (
        w.relevance * np.clip(relevance, 0.0, 1.0)
        + w.recency * recency
        + w.importance * np.clip(importance, 0.0, MAX_IMPORTANCE) / MAX_IMPORTANCE
        + w.frequency * frequency
    )
    return score
