"""The fused read path (seed 000 §3.5), its stages in order:

    query → embed ∥ keyword ∥ scan plan → [semantic → graph] ∥ keyword ∥ temporal-graph
          → fusion (RRF, hydration) → rerank → MMR → token budget → trace

Each retriever runs in a worker thread on its own pooled connection; the keyword retriever
starts while the query is being embedded, as does the semantic retriever's plan of a filtered
scan, and graph retrieval starts from the semantic retriever's hits (its entry points) as
soon as those are in (during the semantic retriever's HNSW walk, under a narrow filter). The
temporal-graph retriever runs only when the query states a time constraint. This module holds
the threads and the order; the retrievers are `semantic`, `keyword` and `arms`, the stages
after them `fusion`, `rerank/`, `scoring` (MMR, budget) and `trace`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.db.pool import Pool
from memora.nlp.embedding import TextEmbedder
from memora.nlp.temporal import QueryTimeRange, parse_query_range, strip_time_expression
from memora.retrieval import arms, entities, expansion, fusion, scoring, semantic, validity
from memora.retrieval.access import AccessRecorder
from memora.retrieval.cross_encoder import PairScorer
from memora.retrieval.failing import FailingUnits
from memora.retrieval.filters import Matching, broad_count
from memora.retrieval.graph import SpreadSettings
from memora.retrieval.held_links import AgentLinks, HeldLinks
from memora.retrieval.held_terms import FilterTerms
from memora.retrieval.holding import FilterHolder
from memora.retrieval.keyword import K1, B, KeywordIndex, TermStats
from memora.retrieval.mentions import Mentions, MentionSignatures, Unheld
from memora.retrieval.passing import PassingUnits
from memora.retrieval.rerank import Reranker, Rerankers
from memora.retrieval.trace import Clock, trace
from memora.retrieval.types import ArmResult, Candidate, SearchOutcome, SearchParams, SearchScope

NO_ENTITY = "the query names no known entity"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NamedEntities:
    """The entity retriever's first half: the agent's entities the query names (id → the names
    of it that matched), the query without those names (None when it names none), the ms the
    lookup took, and why the retriever does not go on when it does not. The second half puts
    in `mentions` the named entities' mentions it read, when it read them all
    (`MentionSignatures`), for hydration to know which candidates mention one."""

    entities: dict[UUID, list[str]] = field(default_factory=dict)
    about: str | None = None
    ms: float = 0.0
    note: str = NO_ENTITY
    mentions: dict[UUID, Mentions] = field(default_factory=dict)

    def mentioning(self) -> Callable[[str], bool] | None:
        """Whether a unit (id as text) mentions one of the entities, from their mentions as
        the entity retriever read them in this search (None when it did not read them all)."""
        if not self.entities or self.mentions.keys() != self.entities.keys():
            return None
        held = [m.positions for m in self.mentions.values()]
        return lambda unit: any(unit in positions for positions in held)


def _timed(name: str, fn: Callable[[], list[tuple[UUID, float]]]) -> ArmResult:
    started = time.perf_counter()
    ranked = fn()
    return ArmResult(name, ranked, ms=round((time.perf_counter() - started) * 1000, 2))


class Retriever:
    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        embedder: TextEmbedder,
        *,
        access: AccessRecorder | None = None,
    ) -> None:
        self.settings, self.pool, self.embedder = settings, pool, embedder
        self.keyword = KeywordIndex(ttl=settings.keyword_stats_ttl_seconds)
        self.mentions = MentionSignatures(
            settings.entity_signature_cache_mb << 20, settings.entity_signature_ttl_seconds
        )
        # the units of narrow filters with their embeddings; a quarter for the keyword index
        # of their units and an eighth for the units failing broad ones, both read in the
        # background (as are the embeddings of the mentions compared)
        held, ttl = settings.filter_cache_mb << 20, settings.filter_cache_ttl_seconds
        self.passing = PassingUnits(held * 5 // 8, ttl) if held > 0 else None
        self.terms = FilterTerms(held // 4, ttl) if held > 0 else None
        self.failing = FailingUnits(held // 8, ttl) if held > 0 else None
        self._background = ThreadPoolExecutor(1, thread_name_prefix="memora-filter-read")
        # the links of the agents searched, read in the background
        self.links = (
            HeldLinks(pool, settings.graph_cache_mb << 20, settings.graph_cache_ttl_seconds)
            if settings.graph_cache_mb > 0
            else None
        )
        self.access = access or AccessRecorder(pool, settings.access_flush_seconds)
        self.spread = SpreadSettings.from_settings(settings)
        self.rerankers = Rerankers(settings)
        # five tasks per search (keyword, semantic→graph, temporal, entity, history); a graph
        # that starts during a filtered walk runs apart, as its walk waits for it
        self._executor = ThreadPoolExecutor(
            5 * settings.search_concurrency, thread_name_prefix="memora-retrieval"
        )
        self._graph_executor = ThreadPoolExecutor(
            settings.search_concurrency, thread_name_prefix="memora-graph"
        )
        self._slots = threading.BoundedSemaphore(settings.search_concurrency)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._graph_executor.shutdown(wait=True, cancel_futures=True)
        self._background.shutdown(wait=True, cancel_futures=True)
        if self.links is not None:
            self.links.close()
        self.access.close()
        self.rerankers.close()

    def cross_encoder(self) -> PairScorer:
        """The cross-encoder's model, loaded once, on first use (or at start with
        MEMORA_PRELOAD_CROSS_ENCODER); RerankerUnavailable when it cannot be."""
        return self.rerankers.cross_encoder.model()

    # ------------------------------------------------------------------ search
    def search(self, p: SearchParams) -> SearchOutcome:
        reranker = self.rerankers[p.reranker]
        reranker.ready()  # fail before any work when it cannot run (the cross-encoder's model)
        with self._slots:
            return self._search(p, reranker)

    def _search(self, p: SearchParams, reranker: Reranker) -> SearchOutcome:
        clock = Clock()
        scope = SearchScope.of(p)
        reference = p.reference_time or utcnow()
        per_arm = min(500, max(50, 3 * p.top_k))
        budget = p.thinking_budget
        # who passes the filter, as far as known: for keyword, graph and entity
        matching = Matching()
        keyword = self._executor.submit(self._keyword, scope, p.query, per_arm, matching)
        named = self._executor.submit(self._named_entities, scope, p.query)

        # the semantic retriever plans a filtered scan while the query is being embedded
        query_ready: Future[np.ndarray] = Future()
        semantic_graph = self._executor.submit(
            self._semantic_then_graph, scope, query_ready, per_arm, budget, matching
        )
        time_range = parse_query_range(p.query, reference)
        window = validity.window_of(p.as_of, time_range, reference)
        texts = [p.query]
        if time_range is not None:
            texts.append(strip_time_expression(p.query, time_range))
        try:
            # one forward pass for the query and what its parts ask: the query without its
            # time expression (the temporal retriever's topic) and without the entities it
            # names (the entity retriever's), which the entity lookup has found meanwhile
            naming = named.result()
            if naming.about is not None:
                texts.append(naming.about)
            vectors = self.embedder.embed_queries(texts)
        except BaseException as exc:
            query_ready.set_exception(exc)
            raise
        query_ready.set_result(vectors[0])
        t = clock.lap("embed", clock.started)
        query_vec = vectors[0]
        topic_vec = vectors[1] if time_range is not None else query_vec
        about_vec = vectors[-1] if naming.about is not None else None

        temporal = (
            self._executor.submit(self._temporal, scope, topic_vec, time_range, per_arm, budget)
            if time_range is not None
            else None
        )
        entity = (
            self._executor.submit(self._entity_units, scope, naming, about_vec, matching)
            if about_vec is not None
            else None
        )
        history = (
            self._executor.submit(self._history, scope, window, query_vec, per_arm)
            if window is not None
            else None
        )
        nearest, graph = semantic_graph.result()
        keyword_result, stats = keyword.result()
        entity_result = (
            entity.result()
            if entity is not None
            else ArmResult("entity", ran=False, note=naming.note)
        )
        entity_ids = list(naming.entities)
        results = {
            "semantic": nearest,
            "keyword": keyword_result,
            "graph": graph,
            "temporal": temporal.result()
            if temporal is not None
            else ArmResult("temporal", ran=False, note="no time constraint in the query"),
            "entity": entity_result,
        }
        if history is not None:
            results["history"] = history.result()
        t = clock.lap("retrieval", t)

        candidates = fusion.fuse(
            self.pool, scope, p, settings=self.settings, results=results, query_vec=query_vec,
            about_vec=query_vec if about_vec is None else about_vec, entity_ids=entity_ids,
            keyword=self.keyword.lateral(stats), window=window, mentioning=naming.mentioning(),
            recheck=(
                fusion.Recheck(scope.where, matching.failing_since)
                if matching.failing is not None
                else None
            ),
        )  # fmt: skip
        t = clock.lap("fusion", t)
        if candidates:
            reranker.rerank(p.query, candidates, reference)
        t = clock.lap("rerank", t)
        chosen = [candidates[i] for i in self._diversify(p, candidates)]
        t = clock.lap("mmr", t)
        max_tokens = p.max_tokens or self.settings.search_max_tokens
        fits = scoring.within_budget(
            self.embedder.count_tokens([c.text for c in chosen]), max_tokens
        )
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
                p, reranker, results, candidates, kept, time_range, stats, clock, max_tokens,
                window,
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

    # ------------------------------------------------------------------ retrievers
    def _keyword(
        self, scope: SearchScope, query: str, limit: int, matching: Matching
    ) -> tuple[ArmResult, TermStats]:
        started = time.perf_counter()
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            terms = self.keyword.terms(conn, query)
            stats = self.keyword.stats(conn, scope.agent_key, terms)
            if scope.where.sql and stats.idf:
                ranked = self._keyword_filtered(conn, scope, stats, limit, matching)
            else:
                ranked = self.keyword.search(
                    conn, scope, stats=stats, limit=limit,
                    match_budget=self.settings.keyword_match_budget,
                )  # fmt: skip
        result = ArmResult("keyword", ranked, ms=round((time.perf_counter() - started) * 1000, 2))
        if not terms:
            result.note = "no searchable words in the query"
        return result, stats

    def _keyword_filtered(
        self,
        conn: Connection[Any],
        scope: SearchScope,
        stats: TermStats,
        limit: int,
        matching: Matching,
    ) -> list[tuple[UUID, float]]:
        """Under a filter whose units' keyword index is held (`memora.retrieval.held_terms`),
        every unit that passes is ranked here. Otherwise the keyword retriever's way depends
        on the share of the agent's units the planner expects to pass it, estimated once a
        search by the semantic retriever's plan (`matching.planned`; none: a filter few units
        pass). Where the units failing a broad filter are held (`memora.retrieval.failing`),
        the unfiltered best are read without waiting for the plan (as many as the share
        makes enough: `broad_count`), and those that fail dropped once it has them; read
        further when more failed."""
        if self.terms is not None:
            held = self.terms.refreshed(conn, scope)
            if held is not None:
                return held.best(stats.idf, stats.avgdl, limit, k1=K1, b=B)
            if self.terms.wanted(scope):
                self._background.submit(self._read_whole, self.terms, scope)
        budget = self.settings.keyword_match_budget
        fails = self.failing.count(scope) if self.failing is not None else None
        early = None
        if fails is not None:  # most units pass: `fails` of them fail
            share = 1 - fails / max(stats.n_docs, 1)
            count = broad_count(limit, share, fails)
            early = self.keyword.best(conn, scope, stats=stats, count=count, match_budget=budget)
        matching.planned.wait()
        failing = matching.failing
        if failing is None:
            return self.keyword.search(
                conn, scope, stats=stats, limit=limit, match_budget=budget,
                share=matching.share or 0.0,
            )  # fmt: skip
        if early is None:  # held since this search began
            count = broad_count(limit, matching.share or 0.0, len(failing))
            early = self.keyword.best(conn, scope, stats=stats, count=count, match_budget=budget)
        passed = failing.outside(early)
        if len(passed) < limit and len(early) == count < limit + len(failing):
            # more of the best failed than the share made likely: as many more as fail
            count = limit + len(failing)
            early = self.keyword.best(conn, scope, stats=stats, count=count, match_budget=budget)
            passed = failing.outside(early)
        return passed[:limit]

    def _semantic_then_graph(
        self,
        scope: SearchScope,
        query: Future[np.ndarray],
        limit: int,
        budget: int,
        matching: Matching,
    ) -> tuple[ArmResult, ArmResult]:
        """Semantic retrieval, then the graph from its best hits; started with the search, it
        takes a connection and plans a filtered scan (semantic.plan_scan) while `query` (the
        query's embedding) is made. Its time in the trace counts from the embedding.

        An HNSW walk under a filter that most units fail goes on well past its first hits
        to find enough that pass; the graph then starts from those first hits (the walk's
        nearest) on a connection of its own while the walk goes on (10 % filter at 100k
        memories: search 1.10 → 1.03 × the unfiltered time). Otherwise the graph follows.
        `matching` learns who passes the filter; its `settled` is set once the exact scan is
        done (every unit that passes known), else as soon as the plan says there is none. A
        filter whose units are held here has them brought up to date while the query is
        embedded, so who passes is known before the embedding is (the entity retriever,
        waiting for it, then starts with the embedding, as it does unfiltered)."""
        s = self.settings
        ef_search = min(1000, max(64, 2 * limit, budget))
        early: list[Future[ArmResult]] = []

        links: AgentLinks | None = None  # the agent's held links, once brought up to date

        def start_graph(first: list[tuple[UUID, float]]) -> None:
            early.append(
                self._graph_executor.submit(
                    self._graph, scope, first, matching, budget, None, links
                )
            )

        # a filter searched before is ranked from the units held in this process
        recurs = bool(scope.where.sql) and self.passing is not None and self.passing.recurs(scope)
        held = self.passing if recurs else None
        try:
            with self.pool.tenant_connection(scope.tenant_id) as conn:
                at_most = semantic.plan_scan(
                    conn, scope, limit=limit, exact_max=s.filter_exact_scan_max,
                    matching=matching, passing=held, failing=self.failing,
                    units=self.keyword.documents(scope.agent_key),
                )  # fmt: skip
                if matching.broad:
                    self._learn_failing(conn, scope, matching)
                matching.planned.set()
                if not at_most:
                    matching.settled.set()  # a walk: who passes is not learned
                known = None  # a held filter's units, brought up to date while it is embedded
                if at_most and held is not None:
                    known = held.read(conn, scope, at_most)
                    if known is not None:
                        matching.know_all(known.text, known.members)
                    else:
                        at_most = 0  # more pass than may be ranked exactly: walked
                    matching.settled.set()
                narrow_walk = bool(scope.where.sql) and not at_most and not matching.broad
                # the agent's links held here, brought up to date while the query is embedded
                if self.links is not None:
                    links = self.links.current(conn, scope.tenant_id, scope.agent_key)
                vector = query.result()
                nearest = _timed(
                    "semantic",
                    lambda: semantic.nearest(
                        conn, scope, vector=vector, limit=limit, ef_search=ef_search,
                        min_similarity=s.semantic_min_similarity,
                        exact_max=s.filter_exact_scan_max, matching=matching, at_most=at_most,
                        first=start_graph if narrow_walk else None,
                        first_count=s.graph_entry_points, known=known,
                    ),
                )  # fmt: skip
                matching.settled.set()
                if not early:
                    return nearest, self._graph(
                        scope, nearest.ranked, matching, budget, conn, links
                    )
            return nearest, early[0].result()
        finally:  # also when the above failed: the retrievers waiting on them go on
            matching.planned.set()
            matching.settled.set()

    def _learn_failing(self, conn: Connection[Any], scope: SearchScope, matching: Matching) -> None:
        """Under a broad filter, the units that fail it (`matching.failing`) when held here,
        brought up to date in `conn`; else, from the filter's second search, read in the
        background for the next searches (`memora.retrieval.failing`)."""
        if self.failing is None:
            return
        held = self.failing.refreshed(conn, scope)
        if held is not None:
            matching.failing, matching.failing_since = held.members, held.horizon
        elif self.failing.wanted(scope):
            self._background.submit(self._read_whole, self.failing, scope)

    def _read_whole(self, holder: FilterHolder[Any], scope: SearchScope) -> None:
        """`holder`'s entry for the scope's filter, read whole in the background (`wanted`);
        until it is in, the searches go on without it, and a failed read is tried again."""
        try:
            with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
                holder.load(conn, scope)
        except Exception:
            log.exception("reading %s for a filter", type(holder).__name__)

    def _graph(
        self,
        scope: SearchScope,
        nearest: list[tuple[UUID, float]],
        matching: Matching,
        budget: int,
        conn: Connection[Any] | None = None,
        held: AgentLinks | None = None,
    ) -> ArmResult:
        """Graph retrieval from the nearest units (the semantic retriever's, best first), on
        `conn` or a pooled connection of its own, exploring at most `budget` units; over
        `held`, the agent's links in memory, when there."""
        if conn is None:
            with self.pool.tenant_connection(scope.tenant_id) as own:
                return self._graph(scope, nearest, matching, budget, own, held)
        s = self.settings
        entry = {
            str(i): 1.0 for i, sim in nearest[: s.graph_entry_points]
            if sim >= s.graph_entry_similarity
        }  # fmt: skip
        graph = _timed(
            "graph",
            lambda: arms.graph_walk(
                conn, scope, entry=entry, budget=budget, fanout=s.graph_fanout,
                spread=self.spread, matching=matching, held=held,
            ),
        )  # fmt: skip
        if not entry:
            graph.note = f"no semantic match ≥ {s.graph_entry_similarity} to start from"
        return graph

    def _named_entities(self, scope: SearchScope, query: str) -> NamedEntities:
        """The entity retriever's first half, from the start of the search (while the query's
        time expression is parsed): the agent's entities the query names and the query without
        their names, which the search embeds in its one embedding call."""
        started = time.perf_counter()
        if self.settings.entity_units_per_entity <= 0:
            return NamedEntities(note="off")
        names = expansion.phrases(query)
        if not names:
            return NamedEntities(note="no names in the query")
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            named = entities.query_entities(conn, scope, names=names)
        if not named:
            return NamedEntities()
        matched = {n for found in named.values() for n in found}
        ms = (time.perf_counter() - started) * 1000
        return NamedEntities(named, expansion.without_names(query, matched), ms)

    def _entity_units(
        self, scope: SearchScope, named: NamedEntities, vector: np.ndarray, matching: Matching
    ) -> ArmResult:
        """The entity retriever's second half: the units mentioning the named entities most
        similar to the query without their names (`vector`). Under a filter ranked exactly it
        waits for the semantic retriever's exact scan (`matching.settled`), which knows every
        unit that passes, and compares only the mentions among them: their ids sent with the
        statement when few (at most MEMORA_FILTER_EXACT_SCAN_MAX), else the mentions held in
        memory kept to them (`entities.entity_units`). Its time in the trace is both halves', not
        the waits between them."""
        s = self.settings
        if scope.where.sql:
            matching.settled.wait()
        started = time.perf_counter()
        unheld: list[Unheld] = []
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            ranked = entities.entity_units(
                conn, scope, entity_ids=list(named.entities), vector=vector,
                per_entity=s.entity_units_per_entity, min_similarity=s.entity_min_similarity,
                mentions=self.mentions, exact_max=s.filter_exact_scan_max, matching=matching,
                unheld=unheld, read=named.mentions,
            )  # fmt: skip
        ms = round(named.ms + (time.perf_counter() - started) * 1000, 2)
        if unheld:  # compared by PostgreSQL this time: their embeddings held for the next
            self._background.submit(self._hold_mentions, scope.tenant_id, unheld)
        return ArmResult("entity", ranked, ms=ms)

    def _hold_mentions(self, tenant_id: str, unheld: list[Unheld]) -> None:
        try:
            with self.pool.tenant_connection(tenant_id, autocommit=True) as conn:
                self.mentions.hold(conn, unheld)
        except Exception:  # the next searches compare them in PostgreSQL and try again
            log.exception("reading the embeddings of mentions")

    def _history(
        self, scope: SearchScope, window: validity.Window, vector: np.ndarray, limit: int
    ) -> ArmResult:
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            return _timed(
                "history",
                lambda: validity.history(
                    conn, scope, window, vector=vector, limit=limit,
                    min_similarity=self.settings.semantic_min_similarity,
                ),
            )  # fmt: skip

    def _temporal(
        self,
        scope: SearchScope,
        vector: np.ndarray,
        time_range: QueryTimeRange,
        limit: int,
        budget: int,
    ) -> ArmResult:
        s = self.settings
        with self.pool.tenant_connection(scope.tenant_id) as conn:
            return _timed(
                "temporal",
                lambda: arms.temporal(
                    conn, scope, vector=vector, time_range=time_range, limit=limit,
                    spread=budget, decay=s.graph_decay,
                    seed_similarity=s.temporal_seed_similarity,
                    min_similarity=s.temporal_min_similarity, exact_max=s.filter_exact_scan_max,
                ),
            )  # fmt: skip
