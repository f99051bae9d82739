"""The lifecycle's numbers as pure functions: importance at ingest, the recall score (seed 002
§4.6) and attenuation (§4.5)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from memora.config import Settings

MIN_IMPORTANCE, MAX_IMPORTANCE = 1.0, 10.0

# ---------------------------------------------------------------------- importance heuristic
_FIRST_PERSON_PREFERENCE = re.compile(
    r"\b(?:i|i'm|i am|my|we|our)\b.*\b(?:love|hate|prefer|like|dislike|favou?rite|always|never|"
    r"allergic|decided|choose|chose|want|need|believe)\b",
    re.IGNORECASE,
)
_DECISION_OR_PLAN = re.compile(
    r"\b(?:decided|decision|plan|planning|plans|will|going to|intend|goal|promise|deadline|"
    r"appointment|scheduled|booked|moving|moved|married|engaged|divorced|born|died|hired|fired|"
    r"quit|joined|graduated|diagnosed|bought|sold)\b",
    re.IGNORECASE,
)
_NUMBER_OR_DATE = re.compile(
    r"\d|\b(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|yesterday)\b",
    re.IGNORECASE,
)
_SMALL_TALK = re.compile(
    r"^\W*(?:hi|hello|hey|thanks|thank you|ok|okay|bye|good (?:morning|night)|lol|haha)\b",
    re.IGNORECASE,
)


_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")


def heuristic_importance(text: str, entity_count: int | None) -> float:
    """1–10 without an LLM (docs/lifecycle.md): 3 for any statement, + up to 2 for named
    entities (1 each; when not known yet, capitalised words inside a sentence count), + 2 for a
    first-person preference or decision, + 1.5 for a decision, a plan or a life event, + 1 for
    a date or a number; short small talk stays at 1."""
    if _SMALL_TALK.match(text) and len(text) < 40:
        return MIN_IMPORTANCE
    names = entity_count if entity_count is not None else len(set(_NAME.findall(text)))
    score = 3.0 + min(2.0, float(names))
    if _FIRST_PERSON_PREFERENCE.search(text):
        score += 2.0
    if _DECISION_OR_PLAN.search(text):
        score += 1.5
    if _NUMBER_OR_DATE.search(text):
        score += 1.0
    return clamp_importance(score)


def clamp_importance(value: float) -> float:
    return max(MIN_IMPORTANCE, min(MAX_IMPORTANCE, float(value)))


# ---------------------------------------------------------------------------- recall score
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
    return (
        w.relevance * np.clip(relevance, 0.0, 1.0)
        + w.recency * recency
        + w.importance * np.clip(importance, 0.0, MAX_IMPORTANCE) / MAX_IMPORTANCE
        + w.frequency * frequency
    )


# ------------------------------------------------------------------------------ attenuation
def attenuated(importance: float, days_since_access: float, rate: float) -> float:
    """importance · e^(−λ·days since the last access) (seed 002 §4.5, λ = 0.1 by default)."""
    return importance * math.exp(-rate * max(0.0, days_since_access))


def reflection_due(new_importance_sum: float, threshold: float) -> bool:
    """Generative Agents' trigger: the summed importance of memories since the last
    reflection passes the threshold (150 on the 1–10 scale)."""
    return new_importance_sum >= threshold
