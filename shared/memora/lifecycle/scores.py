"""The lifecycle's numbers as pure functions: importance at ingest and attenuation (seed 002
§4.5). The recall score (§4.6) is a reranker of the read path: memora.retrieval.rerank.recall."""

from __future__ import annotations

import math
import re

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


# ------------------------------------------------------------------------------ attenuation
def attenuated(importance: float, days_since_access: float, rate: float) -> float:
    """importance · e^(−λ·days since the last access) (seed 002 §4.5, λ = 0.1 by default)."""
    return importance * math.exp(-rate * max(0.0, days_since_access))


def reflection_due(new_importance_sum: float, threshold: float) -> bool:
    """Generative Agents' trigger: the summed importance of memories since the last
    reflection passes the threshold (150 on the 1–10 scale)."""
    return new_importance_sum >= threshold


def retention_score(importance: float, days_since_access: float, rate: float) -> float:
    """How much a memory is worth keeping when an agent is over its limits (seed 002 §4.9): its
    attenuated importance, the number attenuation compares with the floor. The limits job
    archives the lowest first (store.evolution.lowest_retention orders by its logarithm)."""
    return attenuated(importance, days_since_access, rate)
