"""The heuristic reranker (seed 000 §3.3.1) and its pseudo-relevance feedback pass: a weighted
sum of the candidates' signals, then the similarity to what that first pass put on top
(docs/retrieval.md). The formula is pure functions over arrays, unit-tested apart."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal
from uuid import UUID

import numpy as np

from memora.basics.config import Settings
from memora.retrieval.statements import statement_share
from memora.retrieval.types import Candidate

RecencyFormula = Literal["decay", "seed"]


class HeuristicReranker:
    name = "heuristic"
    backend = None  # a formula

    def __init__(self, settings: Settings) -> None:
        self.weights = HeuristicWeights.from_settings(settings)
        self.recency_formula: RecencyFormula = settings.recency_formula
        self.feedback_top = settings.heuristic_feedback_top

    def ready(self) -> None:
        """Nothing to load."""

    def rerank(self, query: str, candidates: Sequence[Candidate], reference: datetime) -> None:
        formula = self.recency_formula
        keyword = np.array([c.keyword for c in candidates])
        near = neighbour_keyword([c.place for c in candidates], scale_to_max(keyword))
        stated = np.array([statement_share(c.text, c.speaker) for c in candidates])
        scores = heuristic_scores(
            np.array([c.semantic for c in candidates]),
            keyword,
            np.array([recency_boost(c.event_date, reference, formula) for c in candidates]),
            np.array([frequency_boost(c.access_count) for c in candidates]),
            np.array([c.neighbours for c in candidates]),
            self.weights,
            answer_type=np.array([float(c.answer_type) for c in candidates]),
            speaker=np.array([float(c.said_by_named) for c in candidates]),
            near_keyword=near,
            statement=stated,
            relation=np.array([float(c.states_relation) for c in candidates]),
        )
        # pseudo-relevance feedback: a second pass adds the similarity to what the first
        # pass put on top
        feedback = np.zeros(len(candidates))
        if self.weights.feedback > 0:
            embeddings = np.stack([c.embedding for c in candidates])
            feedback = feedback_similarity(embeddings, scores, self.feedback_top)
        final = scores + self.weights.feedback * feedback
        for c, value, fb, nk, st in zip(candidates, final, feedback, near, stated, strict=True):
            c.score, c.feedback, c.near_keyword, c.statement = (
                float(value), float(fb), float(nk), float(st)
            )  # fmt: skip


def recency_boost(
    event_date: datetime, reference: datetime, formula: RecencyFormula = "decay"
) -> float:
    """How recent a memory is, in [0, 1], on a log scale over one year.

    "seed" is seed 000 §3.3.1 as written, log(1 + days) / log(366), which grows with age;
    "decay" (the default) is its complement, so that newer memories get the boost the seed's
    prose describes. Memories dated after the reference time count as brand new."""
    days = max(0.0, (reference - event_date).total_seconds() / 86400.0)
    aged = min(1.0, math.log1p(days) / math.log1p(365.0))
    return aged if formula == "seed" else 1.0 - aged


def frequency_boost(access_count: int) -> float:
    """min(1, access_count / 100)."""
    return min(1.0, max(0, access_count) / 100.0)


@dataclass(frozen=True)
class HeuristicWeights:
    """score = semantic·s + keyword·k + recency·r + frequency·f + context·c
    + context_keyword·ck + answer_type·a + speaker·sp + statement·st + relation·rl, then
    + feedback·fb in a second pass.

    The first four are seed 000 §3.3.1 (0.6, 0.4, 0.2, 0.1). Seven extensions, all 0 here (the
    seed's formula exactly): `context`, the best similarity to the query among the units next
    to the candidate in its conversation (the turn a reply answers, the reply to a question),
    `context_keyword`, the best keyword match among the candidates next to it
    (`neighbour_keyword`),
    `answer_type`, 1 for a candidate naming a thing of the kind the question word asks for
    (memora.retrieval.question), `speaker`, 1 for a candidate said by a person the query names
    (what they say of themselves, above the turns that address or echo them), `statement`, the
    share of its words that state rather than ask or exclaim (`statements.statement_share`:
    a statement above the questions and praise that answer it), `relation`, 1 for the
    evidence of an entity relation the question walks from the entities it names
    (`question.relation_path`, `store.relations.evidence_along`), and `feedback`,
    the similarity to the centroid of the first pass's best candidates
    (`feedback_similarity`)."""

    semantic: float = 0.6
    keyword: float = 0.4
    recency: float = 0.2
    frequency: float = 0.1
    context: float = 0.0
    context_keyword: float = 0.0
    feedback: float = 0.0
    answer_type: float = 0.0
    speaker: float = 0.0
    statement: float = 0.0
    relation: float = 0.0

    @classmethod
    def from_settings(cls, s: Settings) -> HeuristicWeights:
        return cls(
            semantic=s.heuristic_semantic_weight,
            keyword=s.heuristic_keyword_weight,
            recency=s.heuristic_recency_weight,
            frequency=s.heuristic_frequency_weight,
            context=s.heuristic_context_weight,
            context_keyword=s.heuristic_context_keyword_weight,
            feedback=s.heuristic_feedback_weight,
            answer_type=s.heuristic_answer_type_weight,
            speaker=s.heuristic_speaker_weight,
            statement=s.heuristic_statement_weight,
            relation=s.heuristic_relation_weight,
        )


def scale_to_max(values: np.ndarray) -> np.ndarray:
    """values / max(values), so the best scores 1 and no match (0) stays 0."""
    top = float(values.max()) if values.size else 0.0
    return values / top if top > 0 else np.zeros(values.shape)


def heuristic_scores(
    semantic: np.ndarray,
    keyword: np.ndarray,
    recency: np.ndarray,
    frequency: np.ndarray,
    context: np.ndarray,
    w: HeuristicWeights,
    *,
    answer_type: np.ndarray | None = None,
    speaker: np.ndarray | None = None,
    near_keyword: np.ndarray | None = None,
    statement: np.ndarray | None = None,
    relation: np.ndarray | None = None,
) -> np.ndarray:
    """The heuristic reranker over one candidate set. Cosine similarity is already normalised
    (clipped to [0, 1]); BM25 scores are divided by the set's best, so that a unit no
    query word matches scores 0 and the best keyword match 1. Recency and frequency are in
    [0, 1], `near_keyword` and `statement` too, `answer_type`, `speaker` and `relation` 0 or
    1 (None: 0 for all). (Min-max scaling of the
    similarities, tried on the LoCoMo dev split, stretched small differences and cost 1 point
    of Recall@10: docs/retrieval.md.)"""
    score: np.ndarray = (
        w.semantic * np.clip(semantic, 0.0, 1.0)
        + w.keyword * scale_to_max(keyword)
        + w.recency * recency
        + w.frequency * frequency
        + w.context * np.clip(context, 0.0, 1.0)
    )
    if answer_type is not None:
        score = score + w.answer_type * answer_type
    if speaker is not None:
        score = score + w.speaker * speaker
    if near_keyword is not None:
        score = score + w.context_keyword * near_keyword
    if statement is not None:
        score = score + w.statement * statement
    if relation is not None:
        score = score + w.relation * relation
    return score


def neighbour_keyword(
    places: Sequence[tuple[UUID, int, int] | None], keyword: np.ndarray
) -> np.ndarray:
    """For each candidate, the best of `keyword` (scaled BM25) among the other candidates next
    to it in its conversation: the units before and after it in its transcript item, and those
    of the items before and after (the neighbours of the context signal). A statement is
    lifted by the reply that repeats the question's words ("I'll remember the allergy"), a
    reply by the question it answers. 0 without a place or a neighbour among the candidates."""
    by_item: dict[tuple[UUID, int], list[tuple[int, float]]] = defaultdict(list)
    for place, value in zip(places, keyword.tolist(), strict=True):
        if place is not None:
            by_item[place[:2]].append((place[2], value))
    near = np.zeros(len(places))
    for n, place in enumerate(places):
        if place is None:
            continue
        document, item, seq = place
        values = [v for s, v in by_item.get((document, item), ()) if abs(s - seq) == 1]
        for other in (item - 1, item + 1):
            values += [v for _, v in by_item.get((document, other), ())]
        near[n] = max(values, default=0.0)
    return near


def feedback_similarity(embeddings: np.ndarray, scores: np.ndarray, top: int) -> np.ndarray:
    """Pseudo-relevance feedback in embedding space: each unit's cosine similarity to the
    normalised centroid of the `top` best-scored units (what the first ranking says the query
    is about), clipped to [0, 1]."""
    if len(scores) == 0 or top <= 0:
        return np.zeros(len(scores))
    best = np.argsort(-np.asarray(scores), kind="stable")[:top]
    centroid = np.asarray(embeddings, dtype=np.float64)[best].mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    if norm < 1e-12:
        return np.zeros(len(scores))
    similarity: np.ndarray = np.asarray(embeddings, dtype=np.float64) @ (centroid / norm)
    clipped: np.ndarray = np.clip(similarity, 0.0, 1.0)
    return clipped
