"""The retrievers' one protocol (`Arm`) and what a search shares with them (`Search`).

Every retriever of the fused read path is an `Arm`: a name (its key in the trace and in
MEMORA_RRF_WEIGHTS), `skip` (why it does not run in a search: its note in the trace)
and `retrieve`, which runs on a worker thread of its own from the start of the search and
returns its ranked list. What one arm needs of another it waits for on the `Search`: the
query's embedding (`Search.vector`), the semantic retriever's nearest units (the graph's entry
points), who passes the search's filter (`Search.matching`), the query's time range. The search
embeds the query once, with the texts that arms rank by instead of it (`Search.give_text`,
declared by `embeds_own`).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar
from uuid import UUID

import numpy as np

from memora.basics.config import Settings
from memora.db.pool import Pool
from memora.nlp.temporal import QueryTimeRange
from memora.retrieval.caches import ReadCaches
from memora.retrieval.caches.mentions import Mentions
from memora.retrieval.filters import Matching
from memora.retrieval.types import ArmResult, SearchParams, SearchScope, TermStats
from memora.retrieval.validity import Window

Ranked = list[tuple[UUID, float]]
NO_ENTITY = "the query names no known entity"


@dataclass(frozen=True)
class ArmContext:
    """What every arm is built with, once per query process."""

    settings: Settings
    pool: Pool
    caches: ReadCaches


@dataclass(frozen=True)
class NamedEntities:
    """The agent's entities the query names (id → the names of it that matched), the query
    without those names (None when it names none), the ms the lookup took, and the mentions of
    them the entity retriever read, when it read them all (`MentionSignatures`), for hydration
    to know which candidates mention one."""

    entities: dict[UUID, list[str]] = field(default_factory=dict)
    about: str | None = None
    ms: float = 0.0
    note: str = NO_ENTITY
    mentions: dict[UUID, Mentions] = field(default_factory=dict)
    known_as: frozenset[str] = frozenset()  # every name and alias of them, normalised

    def mentioning(self) -> Callable[[str], bool] | None:
        """Whether a unit (id as text) mentions one of the entities, from their mentions as
        the entity retriever read them in this search (None when it did not read them all)."""
        if not self.entities or self.mentions.keys() != self.entities.keys():
            return None
        held = [m.positions for m in self.mentions.values()]
        return lambda unit: any(unit in positions for positions in held)


@dataclass(eq=False)
class Search:
    """One search as its arms see it: what it asks and what the arms learn for each other and
    for fusion. `per_arm`: how many units each arm ranks; `budget`: the graph's exploration."""

    params: SearchParams
    scope: SearchScope
    reference: datetime
    per_arm: int
    budget: int
    documents: int | None = None  # the agent's searchable units as counted lately
    matching: Matching = field(default_factory=Matching)  # who passes the filter, as known
    entry_points: Future[Ranked] = field(default_factory=Future)  # the semantic's nearest
    term_stats: TermStats | None = None  # the keyword retriever's, for fusion and the trace
    named: NamedEntities = field(default_factory=NamedEntities)  # the entity retriever's
    _texts: dict[str, str | None] = field(default_factory=dict)
    _awaited: set[str] = field(default_factory=set)
    _given: threading.Condition = field(default_factory=threading.Condition)
    _vectors: Future[dict[str, np.ndarray]] = field(default_factory=Future)
    _when: Future[tuple[QueryTimeRange | None, Window | None]] = field(default_factory=Future)

    @property
    def query(self) -> str:
        return self.params.query

    # ------------------------------------------------------------------ when it asks about
    def dated(self, time_range: QueryTimeRange | None, window: Window | None) -> None:
        """The query's time range and validity window, parsed while the arms start."""
        self._when.set_result((time_range, window))

    @property
    def time_range(self) -> QueryTimeRange | None:
        """The time constraint the query states (waits for the parse)."""
        return self._when.result()[0]

    @property
    def window(self) -> Window | None:
        """What was true when, for a search with `as_of` or a past period (waits likewise)."""
        return self._when.result()[1]

    # ------------------------------------------------------------------ the one forward pass
    def await_texts(self, arms: list[str]) -> None:
        """The arms that give a text of their own before the query is embedded."""
        self._awaited.update(arms)

    def give_text(self, arm: str, text: str | None) -> None:
        """`arm`'s text to embed with the query (None: it ranks by none)."""
        with self._given:
            self._texts.setdefault(arm, text)
            self._given.notify_all()

    def texts(self, order: list[str]) -> dict[str, str]:
        """What to embed, by whose it is: the query ("query"), then the arms' texts in `order`
        (the registry's); waits until every awaited arm has given its text."""
        with self._given:
            self._given.wait_for(lambda: self._awaited <= self._texts.keys())
            own = {arm: text for arm in order if (text := self._texts.get(arm)) is not None}
        return {"query": self.query, **own}

    def embedded(self, vectors: dict[str, np.ndarray]) -> None:
        """The embeddings of `texts`, by the same keys."""
        self._vectors.set_result(vectors)

    def abandon(self, exc: BaseException) -> None:
        """The search failed before its arms had what they wait for: they fail with `exc`."""
        for waited in (self._when, self._vectors):
            if not waited.done():
                waited.set_exception(exc)

    def vector(self, arm: str = "query") -> np.ndarray | None:
        """The embedding of `arm`'s text (the query's by default; None when it gave none),
        once the search has embedded them."""
        return self._vectors.result().get(arm)

    def query_vector(self) -> np.ndarray:
        return self._vectors.result()["query"]


class Arm(ABC):
    """One retriever of the fused read path (docs/retrieval.md; CONTRIBUTING.md, "A
    retriever"). Instances serve every search of a query process, from several threads."""

    name: ClassVar[str]
    embeds_own: ClassVar[bool] = False  # gives a text to embed with the query (`give_text`)
    listed_when_skipped: ClassVar[bool] = True  # in the trace, `ran: false`, when skipped
    dated: ClassVar[bool] = False  # `skip` reads the query's time range (decided once parsed)

    def __init__(self, context: ArmContext) -> None:
        self.context = context
        self.settings = context.settings
        self.pool = context.pool

    def skip(self, search: Search) -> str | None:
        """Why the arm does not run in `search` (its note in the trace); None: it runs. Called
        on the search's thread before the arm starts, so no I/O; it may read the query's time
        range (`search.time_range`) only in an arm that is `dated`."""
        return None

    @abstractmethod
    def retrieve(self, search: Search) -> ArmResult:
        """The arm's ranked units: (id, score on its own scale), best first. Runs on a worker
        thread from the start of the search; an arm that `embeds_own` gives its text first."""


def timed(name: str, fn: Callable[[], Ranked]) -> ArmResult:
    """`fn`'s ranking as `name`'s result, with the time it took."""
    started = time.perf_counter()
    ranked = fn()
    return ArmResult(name, ranked, ms=round((time.perf_counter() - started) * 1000, 2))
