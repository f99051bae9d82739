"""Scoring of the read path as small pure functions over plain data (seed 000 §3.4–3.5).

MMR and the token budget, and the scales and closeness other stages share (RRF is in
`fusion.py`, each reranker's formula in its module of `rerank/`); nothing here touches the
database, so each is unit-tested on lists and arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np

TokenCounter = Callable[[Sequence[str]], list[int]]


def minmax(values: np.ndarray) -> np.ndarray:
    """Scaled to [0, 1]; all-equal values map to 1 when positive, else 0."""
    if values.size == 0:
        return values.astype(np.float64)
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12:
        return np.full(values.shape, 1.0 if hi > 0 else 0.0)
    return (values - lo) / (hi - lo)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64))))


def mmr(relevance: np.ndarray, embeddings: np.ndarray, k: int, lam: float = 0.5) -> list[int]:
    """Maximal marginal relevance: repeatedly pick argmax λ·rel − (1−λ)·max cos(c, selected).

    `relevance` is min-max normalised first so that λ weighs two quantities on one scale;
    `embeddings` are unit vectors. Returns indices in selection order; λ = 1 is plain ranking."""
    n = len(relevance)
    k = min(k, n)
    if k <= 0:
        return []
    rel = minmax(np.asarray(relevance, dtype=np.float64))
    if lam >= 1.0:
        return [int(i) for i in np.argsort(-rel, kind="stable")[:k]]
    sims = np.asarray(embeddings, dtype=np.float64) @ np.asarray(embeddings, dtype=np.float64).T
    max_sim = np.full(n, -np.inf)
    chosen = np.zeros(n, dtype=bool)
    order: list[int] = []
    for _ in range(k):
        penalty = np.where(np.isfinite(max_sim), max_sim, 0.0)
        value = lam * rel - (1.0 - lam) * penalty
        value[chosen] = -np.inf
        pick = int(np.argmax(value))
        order.append(pick)
        chosen[pick] = True
        max_sim = np.maximum(max_sim, sims[pick])
    return order


def fitting(texts: Sequence[str], max_tokens: int, count_tokens: TokenCounter) -> int:
    """How many of `texts`, taken in order, fit in `max_tokens` as `count_tokens` counts them
    (`within_budget`). No tokenizer gives a text more tokens than its UTF-8 bytes and one (a
    WordPiece or BPE token covers a byte at least; SentencePiece may mark the first word with
    a token of its own): when that bound of them all fits, they all do, and nothing is
    tokenized, as with most searches' few short memories."""
    if sum(len(text.encode()) + 1 for text in texts) <= max_tokens:
        return len(texts)
    return within_budget(count_tokens(texts), max_tokens)


def within_budget(token_counts: Sequence[int], max_tokens: int) -> int:
    """How many results, taken in order, fit in `max_tokens`. It stops at the first that does
    not fit, so what is returned is always a prefix of the ranking."""
    used = 0
    for i, n in enumerate(token_counts):
        if used + n > max_tokens:
            return i
        used += n
    return len(token_counts)


def temporal_closeness(when: datetime, start: datetime, end: datetime) -> float:
    """1 − |t − centre| / range size, in [0, 1] (seed 000 §3.1.4): 1 at the centre, 0.5 at the
    edges of the range."""
    size = max(1.0, (end - start).total_seconds())
    centre = start + (end - start) / 2
    return max(0.0, 1.0 - abs((when - centre).total_seconds()) / size)
