"""Benchmark metrics as pure functions over ranked ids (no I/O, no LLM).

LoCoMo: recall@k (the share of a question's evidence turns in the top k) and the reciprocal
rank of the first evidence turn. LongMemEval: the definitions of its `run_retrieval.py`, over
ids in ranked order instead of corpus indices:

- recall_any@k: 1 when any relevant id is in the top k; recall_all@k: 1 when all are;
- ndcg_any@k: binary-relevance nDCG, DCG = rel₁ + Σᵢ₌₂ relᵢ / log₂(i) (the first two ranks
  undiscounted), normalised by the DCG of the whole corpus's relevances sorted;
- session level from a turn ranking ("turn2session"): turn ids `<session>_<n>` map to their
  session, and k grows until the top k turns hold k distinct sessions (or the corpus ends).

Answers: SQuAD-style token F1 (lower case, punctuation and articles dropped).
"""

from __future__ import annotations

import math
import re
import statistics
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

LOCOMO_KS = (5, 10, 20, 50)
LONGMEMEVAL_KS = (1, 3, 5, 10, 30, 50)


# ----------------------------------------------------------------------------- LoCoMo
def recall_at_k(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: set[str]) -> float:
    first = next((i for i, doc in enumerate(ranked, 1) if doc in relevant), None)
    return 1.0 / first if first else 0.0


def locomo_retrieval(ranked: Sequence[str], evidence: set[str]) -> dict[str, float]:
    out = {f"recall@{k}": recall_at_k(ranked, evidence, k) for k in LOCOMO_KS}
    return {**out, "mrr": reciprocal_rank(ranked, evidence)}


# ------------------------------------------------------------------------ LongMemEval
def dcg(relevances: Sequence[float], k: int) -> float:
    top = list(relevances[:k])
    if not top:
        return 0.0
    return top[0] + sum(rel / math.log2(i) for i, rel in enumerate(top[1:], 2))


def ndcg_any(ranked: Sequence[str], relevant: set[str], corpus: Sequence[str], k: int) -> float:
    ideal = dcg(sorted((1.0 if doc in relevant else 0.0 for doc in corpus), reverse=True), k)
    actual = dcg([1.0 if doc in relevant else 0.0 for doc in ranked[:k]], k)
    return actual / ideal if ideal else 0.0


def recall_any(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return float(any(doc in relevant for doc in ranked[:k]))


def recall_all(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    top = set(ranked[:k])
    return float(all(doc in top for doc in relevant))


def evaluate_retrieval(
    ranked: Sequence[str], relevant: set[str], corpus: Sequence[str], k: int
) -> tuple[float, float, float]:
    """(recall_any@k, recall_all@k, ndcg_any@k)."""
    return (
        recall_any(ranked, relevant, k),
        recall_all(ranked, relevant, k),
        ndcg_any(ranked, relevant, corpus, k),
    )


def session_of(turn_id: str) -> str:
    """`<session id>_<turn number>` → the session id (ids may hold underscores themselves)."""
    return turn_id.rsplit("_", 1)[0]


def turn_to_session(
    ranked: Sequence[str], relevant: set[str], corpus: Sequence[str], k: int
) -> tuple[float, float, float]:
    """Session-level figures from a turn ranking, with k widened to k distinct sessions."""
    sessions = [session_of(t) for t in ranked]
    session_corpus = [session_of(t) for t in corpus]
    effective = k
    while effective <= len(session_corpus) and len(set(sessions[:effective])) < k:
        effective += 1
    gold = {session_of(t) for t in relevant}
    return evaluate_retrieval(sessions, gold, session_corpus, effective)


def longmemeval_retrieval(
    ranked_turns: Sequence[str], relevant_turns: set[str], corpus_turns: Sequence[str]
) -> dict[str, float]:
    """Turn- and session-level figures of one question, keys `turn/recall_any@5` etc."""
    out: dict[str, float] = {}
    for level, evaluate in (("session", turn_to_session), ("turn", evaluate_retrieval)):
        for k in LONGMEMEVAL_KS:
            r_any, r_all, ndcg = evaluate(ranked_turns, relevant_turns, corpus_turns, k)
            out[f"{level}/recall_any@{k}"] = r_any
            out[f"{level}/recall_all@{k}"] = r_all
            out[f"{level}/ndcg_any@{k}"] = ndcg
    return out


# ---------------------------------------------------------------------------- answers
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def answer_tokens(text: str) -> list[str]:
    return _ARTICLES.sub(" ", str(text).lower().translate(_PUNCTUATION)).split()


def token_f1(prediction: str, expected: str) -> float:
    predicted, gold = answer_tokens(prediction), answer_tokens(expected)
    if not predicted or not gold:
        return float(predicted == gold)
    common = sum((Counter(predicted) & Counter(gold)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


# -------------------------------------------------------------------------- summaries
def mean_metrics(rows: Iterable[Mapping[str, float | None]]) -> dict[str, float]:
    """The mean of each metric over the rows that have it (None: not measured)."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.items():
            if value is not None:
                values.setdefault(name, []).append(float(value))
    return {name: round(statistics.fmean(v), 4) for name, v in values.items()}
