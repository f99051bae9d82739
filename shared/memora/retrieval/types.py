"""Plain data of the read path: what a search asks, what each retriever found, what comes back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Literal
from uuid import UUID

import numpy as np
from psycopg.types.json import Jsonb

from memora.basics.models import FACT_TYPES
from memora.basics.tenancy import DEFAULT_SCOPE, Scope
from memora.retrieval.filters import NO_FILTER, Filters, Where, compile_filters

# "recall": seed 002 §4.6's relevance, recency, importance and frequency (memora.lifecycle)
RerankerName = Literal["heuristic", "cross-encoder", "recall"]


@dataclass(frozen=True)
class SearchParams:
    agent_id: str  # as the client names it; `scope` maps it to the stored key
    query: str
    fact_types: tuple[str, ...] = FACT_TYPES
    thinking_budget: int = 100
    top_k: int = 10
    reranker: RerankerName = "heuristic"
    max_tokens: int | None = None  # None: the configured default
    reference_time: datetime | None = None  # relative dates resolve against it; None: now
    trace: bool = False
    scope: Scope = DEFAULT_SCOPE
    # recall's filters over the fused candidates: categories, and when it was said [start, end)
    categories: tuple[str, ...] | None = None
    said_between: tuple[datetime | None, datetime | None] | None = None
    filters: Filters | None = None  # metadata, tags, time: applied inside every retriever
    as_of: datetime | None = None  # what was true then, superseded memories included

    @property
    def agent_key(self) -> str:
        return self.scope.key(self.agent_id)


@dataclass(frozen=True)
class SearchScope:
    """What every retriever of one search applies, built once per search (`of`): the tenant
    whose connections it reads on, the agent's stored key, the fact types, and the search's
    filters compiled for the two aliases the retrievers read (`filters.compile_filters`)."""

    tenant_id: str
    agent_key: str
    fact_types: tuple[str, ...]
    where: Where = NO_FILTER  # on `m`: memory_vectors or memory_units
    keyword_where: Where = NO_FILTER  # on `memory_search`: the keyword retriever's

    @classmethod
    def of(cls, p: SearchParams) -> SearchScope:
        return cls(
            p.scope.tenant_id,
            p.agent_key,
            p.fact_types,
            compile_filters(p.filters, "m"),
            compile_filters(p.filters, "memory_search"),
        )

    @property
    def params(self) -> dict[str, Any]:
        """The parameters of `filters.scope_where` and `filters.vector_scope`."""
        return {"agent": self.agent_key, "types": list(self.fact_types)}

    @cached_property
    def filter_key(self) -> tuple[Any, ...]:
        """The tenant, agent, filter conditions and their values: what the query service holds
        a filter's units under (`memora.retrieval.caches.filter_holder`); made once a search."""
        values = json.dumps(
            {k: v.obj if isinstance(v, Jsonb) else v for k, v in self.where.params.items()},
            sort_keys=True,
            default=str,
        )
        return (self.tenant_id, self.agent_key, self.where.sql, values)

    @cached_property
    def units_key(self) -> tuple[Any, ...]:
        """`filter_key` with the fact types: what an entry holds the units of."""
        return (*self.filter_key, self.fact_types)


@dataclass(frozen=True)
class TermStats:
    n_docs: int
    avgdl: float
    idf: dict[str, float]
    df: dict[str, int]

    def matching_terms(self, budget: int) -> list[str]:
        """The terms a unit must contain to be read: the rarest first, while their document
        frequencies add up to at most `budget` (always at least the rarest one). A unit that
        holds only the common terms left out can score at most their small idf sum, so the
        work stays bounded on large agents without losing the units that rank well. Terms
        with a cached df of 0 come free: units written since the count may hold them."""
        chosen = sorted(t for t in self.df if self.df[t] == 0)
        total = 0
        for term in sorted((t for t in self.df if self.df[t] > 0), key=lambda t: (self.df[t], t)):
            if total and total + self.df[term] > budget:
                break
            chosen.append(term)
            total += self.df[term]
        return chosen


@dataclass
class ArmResult:
    """One retriever's ranked list: (unit id, its score on that retriever's own scale)."""

    name: str
    ranked: list[tuple[UUID, float]] = field(default_factory=list)
    ran: bool = True
    ms: float = 0.0
    note: str | None = None


@dataclass
class Candidate:
    """A fused candidate with everything the rerankers, MMR and the budget need."""

    id: UUID
    text: str
    context: str | None
    fact_type: str
    event_date: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    metadata_json: str  # parsed for the hits only
    access_count: int
    embedding: np.ndarray
    semantic: float = 0.0  # cosine similarity to the query
    keyword: float = 0.0  # BM25 score (0 when no query term matches)
    neighbours: float = 0.0  # best similarity to the query of the units next to it
    feedback: float = 0.0  # similarity to the first ranking's best units (heuristic)
    names_entity: bool = False  # mentions an entity the query names
    answer_type: bool = False  # names a thing of the kind the question asks for (question.py)
    speaker: str | None = None  # who said it (a conversation turn's metadata)
    said_by_named: bool = False  # its speaker is an entity the query names
    states_relation: bool = False  # evidence of a relation the question walks (question.py)
    place: tuple[UUID, int, int] | None = None  # (document, item, seq): where it was said
    near_keyword: float = 0.0  # best scaled BM25 of the candidates next to it (heuristic)
    statement: float = 0.0  # share of its words that state, not ask or exclaim (heuristic)
    rrf: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank per retriever
    score: float = 0.0  # the reranker's relevance
    importance: float = 5.0  # 1–10 (memora.lifecycle)
    category: str | None = None
    last_used: datetime | None = None  # last access, else when it was stored

    def hit(self) -> Hit:
        """What a search returns of it, weighted by its score."""
        return Hit(
            id=self.id,
            text=self.text,
            context=self.context,
            event_date=self.event_date,
            weight=round(self.score, 6),
            fact_type=self.fact_type,
            metadata=json.loads(self.metadata_json),
            occurred_start=self.occurred_start,
            occurred_end=self.occurred_end,
        )


@dataclass(frozen=True)
class Hit:
    id: UUID
    text: str
    context: str | None
    event_date: datetime
    weight: float
    fact_type: str
    metadata: dict[str, Any]
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None


@dataclass
class SearchOutcome:
    hits: list[Hit]
    trace: dict[str, Any] | None = None
