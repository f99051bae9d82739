"""A search's trace (`"trace": true`): each retriever's list, the query's terms and time range,
every fused candidate with its signals and score, what was selected, and the time each stage
took; the reranker with what ran it (`reranker_backend`: the cross-encoder's torch, onnx or
onnx-int8; null for a formula). The API returns it as is and the web UI reads it: its shape
is an interface."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from memora.nlp.temporal import QueryTimeRange
from memora.retrieval.question import answer_type, relation_path
from memora.retrieval.rerank import Reranker
from memora.retrieval.types import ArmResult, Candidate, SearchParams, TermStats
from memora.retrieval.validity import NOT_APPLIED, Window


@dataclass
class Clock:
    """The stages' times in milliseconds, by name, from one start."""

    started: float = field(default_factory=time.perf_counter)
    marks: dict[str, float] = field(default_factory=dict)

    def lap(self, name: str, since: float) -> float:
        """Marks `name` as the time since `since`; returns now, the next stage's start."""
        now = time.perf_counter()
        self.marks[name] = round((now - since) * 1000, 2)
        return now

    def total(self) -> None:
        self.marks["total"] = round((time.perf_counter() - self.started) * 1000, 2)


def trace(
    p: SearchParams,
    reranker: Reranker,
    results: dict[str, ArmResult],
    candidates: list[Candidate],
    kept: list[Candidate],
    time_range: QueryTimeRange | None,
    stats: TermStats | None,
    clock: Clock,
    max_tokens: int,
    window: Window | None = None,
) -> dict[str, Any]:
    return {
        "query": p.query,
        "reranker": p.reranker,
        "reranker_backend": reranker.backend,  # the cross-encoder's torch, onnx or onnx-int8
        "filters": p.filters.flat() if p.filters else None,
        "paths": {
            name: {
                "ran": r.ran,
                "ms": r.ms,
                "count": len(r.ranked),
                "note": r.note,
                "results": [{"id": str(i), "score": round(s, 6)} for i, s in r.ranked],
            }
            for name, r in results.items()
        },
        "time_range": {
            "start": time_range.start.isoformat(),
            "end": time_range.end.isoformat(),
            "expression": time_range.expression,
        }
        if time_range
        else None,
        # whether a validity window applied: the request's as_of or a past period in the query
        "as_of": window.describe() if window is not None else NOT_APPLIED,
        "query_terms": {t: round(v, 4) for t, v in stats.idf.items()} if stats else {},
        "answer_type": _answer_type(p.query),
        # the relations the question walks from the entities it names (question.relation_path)
        "relation_path": [sorted(hop) for hop in relation_path(p.query)],
        "candidates": [_candidate(c) for c in candidates],
        "selected": [str(c.id) for c in kept],
        "max_tokens": max_tokens,
        "timings_ms": clock.marks,
    }


def _candidate(c: Candidate) -> dict[str, Any]:
    """A candidate's signals and score, as the reranker weighed them."""
    return {
        "id": str(c.id),
        "rrf": round(c.rrf, 6),
        "ranks": c.ranks,
        "semantic": round(c.semantic, 6),
        "keyword": round(c.keyword, 6),
        "context": round(c.neighbours, 6),
        "context_keyword": round(c.near_keyword, 6),
        "statement": round(c.statement, 6),
        "feedback": round(c.feedback, 6),
        "answer_type": c.answer_type,
        "said_by_named": c.said_by_named,
        "states_relation": c.states_relation,
        "access_count": c.access_count,
        "score": round(c.score, 6),
    }


def _answer_type(query: str) -> dict[str, Any]:
    asks = answer_type(query)
    return {"entity_types": sorted(asks.entity_types), "time": asks.time}
