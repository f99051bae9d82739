"""The fused read path (seed 000 §3.5), its stages in order:

    query → [semantic → graph] ∥ keyword ∥ temporal-graph ∥ entity ∥ history (one embedding)
          → fusion (RRF, hydration) → rerank → MMR → token budget → trace

Every retriever (`memora.retrieval.arms`, one module each behind `arms.Arm`) starts with the
search on a worker thread of its own and waits on the `arms.Search` for what it needs: the
query's embedding, made once for the query and the texts arms rank by instead (the query
without its time expression, without the entities it names), the semantic retriever's nearest
units (the graph's entry points), who passes the filter. This module holds the order, the
threads and the trace; the stages after the retrievers are `fusion`, `rerank/`, `scoring`
(MMR, budget) and `trace`; what the query process holds between searches is `caches`.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import psycopg

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.db.pool import Pool
from memora.nlp.embedding import TextEmbedder
from memora.nlp.temporal import parse_query_range
from memora.retrieval import fusion, scoring, validity
from memora.retrieval.access import AccessRecorder
from memora.retrieval.arms import ARM_TYPES, Arm, ArmContext, Search
from memora.retrieval.arms.keyword import KeywordArm
from memora.retrieval.caches import ReadCaches
from memora.retrieval.rerank import Reranker, Rerankers
from memora.retrieval.rerank.cross_encoder_model import PairScorer
from memora.retrieval.trace import Clock, trace
from memora.retrieval.types import ArmResult, Candidate, SearchOutcome, SearchParams, SearchScope
from memora.store import generations

# A search holds one connection per retriever at most, some of them while they wait on another
# retriever (the semantic one plans on its connection while the entity retriever reads the names
# the query's embedding waits for); the process's background reads take a few besides.
CONNECTIONS_PER_SEARCH = len(ARM_TYPES)
CONNECTIONS_BESIDE_SEARCHES = 2


def pool_size_for(settings: Settings) -> int:
    """Connections a query process's pool needs for `search_concurrency` searches at once."""
    return CONNECTIONS_PER_SEARCH * settings.search_concurrency + CONNECTIONS_BESIDE_SEARCHES


def searches_at_once(settings: Settings, pool: Pool) -> int:
    """`search_concurrency`, or fewer where `pool` is smaller than `pool_size_for` asks: with
    more searches than its connections serve, retrievers holding one could wait on a retriever
    waiting for one, until the pool's timeout."""
    fits = (pool.max_size - CONNECTIONS_BESIDE_SEARCHES) // CONNECTIONS_PER_SEARCH
    return max(1, min(settings.search_concurrency, fits))


class Retriever:
    """The query process's read path: `search(SearchParams) -> SearchOutcome`."""

    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        embedder: TextEmbedder,
        *,
        access: AccessRecorder | None = None,
        caches: ReadCaches | None = None,
        rerankers: Rerankers | None = None,
        generation: int | None = None,
    ) -> None:
        """`access` and `rerankers` may be another retriever's: a retriever on a read replica
        records accesses through the primary's and shares its models. `generation`: the
        embedding generation `embedder` is the model of, checked live by every search
        (`fusion.fuse`; None: not checked)."""
        self.settings, self.pool, self.embedder = settings, pool, embedder
        self.generation = generation
        self.caches = caches or ReadCaches(settings, pool)
        context = ArmContext(settings, pool, self.caches)
        self.arms: list[Arm] = [arm_type(context) for arm_type in ARM_TYPES]
        keyword = next(a for a in self.arms if isinstance(a, KeywordArm))
        self.keyword = keyword.index  # the keyword statistics, also read by fusion
        self.access = access or AccessRecorder(pool, settings.access_flush_seconds)
        self.rerankers = rerankers or Rerankers(settings)
        self._shared: list[object] = [] if access is None else [self.access]
        self._shared += [] if rerankers is None else [self.rerankers]
        # every arm of a search on a thread of its own, for the searches run at once
        at_once = searches_at_once(settings, pool)
        self._executor = ThreadPoolExecutor(
            len(self.arms) * at_once, thread_name_prefix="memora-retrieval"
        )
        self._slots = threading.BoundedSemaphore(at_once)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self.caches.close()
        if self.access not in self._shared:  # another retriever's: closed with it
            self.access.close()
        if self.rerankers not in self._shared:
            self.rerankers.close()

    def cross_encoder(self) -> PairScorer:
        """The cross-encoder's model, loaded once, on first use (or at start with
        MEMORA_PRELOAD_CROSS_ENCODER); RerankerUnavailable when it cannot be."""
        return self.rerankers.cross_encoder.model()

    def search(self, p: SearchParams) -> SearchOutcome:
        reranker = self.rerankers[p.reranker]
        reranker.ready()  # fail before any work when it cannot run (the cross-encoder's model)
        with self._slots:
            return self._search(p, reranker)

    def _search(self, p: SearchParams, reranker: Reranker) -> SearchOutcome:
        clock = Clock()
        search = Search(
            p, SearchScope.of(p), p.reference_time or utcnow(),
            per_arm=min(500, max(50, 3 * p.top_k)), budget=p.thinking_budget,
        )  # fmt: skip
        search.documents = self.keyword.documents(search.scope.agent_key)
        results, query_vec, t = self._retrieve(search, clock)
        try:
            candidates = self._fuse(search, results, query_vec)
        except psycopg.Error as exc:  # MG001: a reembed switch came before the hydration
            if generations.changed(exc):
                raise generations.GenerationChanged(str(exc)) from exc
            raise
        t = clock.lap("fusion", t)
        if candidates:
            reranker.rerank(p.query, candidates, search.reference)
        t = clock.lap("rerank", t)
        chosen = [candidates[i] for i in self._diversify(p, candidates)]
        t = clock.lap("mmr", t)
        max_tokens = p.max_tokens or self.settings.search_max_tokens
        fits = scoring.fitting([c.text for c in chosen], max_tokens, self.embedder.count_tokens)
        kept = chosen[:fits]
        clock.lap("budget", t)
        self.access.record(c.id for c in kept)
        clock.total()
        hits = [c.hit() for c in kept]
        if not p.trace:
            return SearchOutcome(hits)
        return SearchOutcome(
            hits,
            trace(
                p, reranker, results, candidates, kept, search.time_range, search.term_stats,
                clock, max_tokens, search.window,
            ),
        )  # fmt: skip

    def _retrieve(
        self, search: Search, clock: Clock
    ) -> tuple[dict[str, ArmResult], np.ndarray, float]:
        """Every arm's result in the registry's order (a skipped arm's `ran: false` with its
        note, or left out), the query's embedding and when the retrieval ended. The arms start
        first, those whose `skip` reads the query's time range once it is parsed; the query is
        embedded once every arm that embeds a text of its own has given it."""
        notes: dict[str, str | None] = {}
        started: dict[str, Future[ArmResult]] = {}
        self._start([a for a in self.arms if not a.dated], search, notes, started)
        p, reference = search.params, search.reference
        try:
            time_range = parse_query_range(p.query, reference)
            search.dated(time_range, validity.window_of(p.as_of, time_range, reference))
            self._start([a for a in self.arms if a.dated], search, notes, started)
            texts = search.texts([a.name for a in self.arms])
            vectors = self.embedder.embed_queries(list(texts.values()))
        except BaseException as exc:
            search.abandon(exc)
            raise
        search.embedded(dict(zip(texts, vectors, strict=True)))
        t = clock.lap("embed", clock.started)
        results: dict[str, ArmResult] = {}
        for arm in self.arms:
            future = started.get(arm.name)
            if future is not None:
                results[arm.name] = future.result()
            elif arm.listed_when_skipped:
                results[arm.name] = ArmResult(arm.name, ran=False, note=notes[arm.name])
        return results, vectors[0], clock.lap("retrieval", t)

    def _start(
        self,
        arms: list[Arm],
        search: Search,
        notes: dict[str, str | None],
        started: dict[str, Future[ArmResult]],
    ) -> None:
        """Each of `arms` on a thread of its own, unless it skips the search (its note)."""
        for arm in arms:
            notes[arm.name] = note = arm.skip(search)
            if note is None:
                if arm.embeds_own:
                    search.await_texts([arm.name])
                started[arm.name] = self._executor.submit(_run, arm, search)

    def _fuse(
        self, search: Search, results: dict[str, ArmResult], query_vec: np.ndarray
    ) -> list[Candidate]:
        named, matching = search.named, search.matching
        about_vec = search.vector("entity") if named.about is not None else None
        return fusion.fuse(
            self.pool, search.scope, search.params, settings=self.settings, results=results,
            query_vec=query_vec, about_vec=query_vec if about_vec is None else about_vec,
            entity_ids=list(named.entities), keyword=self.keyword.lateral(search.term_stats),
            window=search.window, mentioning=named.mentioning(), speakers=named.known_as,
            generation=self.generation,
            recheck=(
                fusion.Recheck(search.scope.where, matching.failing_since)
                if matching.failing is not None
                else None
            ),
        )  # fmt: skip

    def _diversify(self, p: SearchParams, candidates: list[Candidate]) -> list[int]:
        if not candidates:
            return []
        return scoring.mmr(
            np.array([c.score for c in candidates]),
            np.stack([c.embedding for c in candidates]),
            p.top_k,
            self.settings.mmr_lambda,
        )


def _run(arm: Arm, search: Search) -> ArmResult:
    """`arm.retrieve`, never leaving the search waiting for a text it did not give."""
    try:
        return arm.retrieve(search)
    finally:
        if arm.embeds_own:
            search.give_text(arm.name, None)  # no-op once given
