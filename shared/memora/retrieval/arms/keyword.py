"""Keyword retrieval: Okapi BM25 computed in PostgreSQL over its English full-text index.

The query's terms are the lexemes PostgreSQL's `english` configuration makes of it (stemmed,
stop words removed), but for the words that hedge an inference question (`question.HEDGES`:
"Would Ines *likely* enjoy…" would match every turn saying "like"); a unit matches when it
contains any of them (an OR query, through the GIN index), and matches are ranked by true BM25
rather than `ts_rank`:

    score = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl / avgdl)),
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))

tf is the number of positions of the lexeme in the unit, dl the unit's number of distinct
lexemes. An unfiltered search reads `memory_postings` (migration 0022): each (unit, lexeme)
with its tf and dl, indexed by agent, lexeme and the lexeme's weight in the unit, so a term's
strongest postings come from its index alone (under a filter most units pass, checked against
it by key). Searches under narrower filters and BM25 for given units (`lateral`) read
`memory_search`, a narrow copy of every embedded unit's tsvector with a GIN index on
(agent_id, search_vector) (migration 0005), not the wide `memory_units` rows.

`ts_rank` knows no document frequency, so a question's rare, telling word ("lidar") counts
no more than its common ones ("work"); BM25's idf is what makes the keyword list precise on
natural-language questions. N and each term's df are per agent, counted by the write path
(`memory_terms`, memora.store.terms), avgdl is a sample's; all three are cached for `ttl`
seconds (they move slowly; a stale df changes a weight, never what matches).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from cachetools import TTLCache
from psycopg import Connection
from psycopg.rows import tuple_row

from memora.retrieval.arms.base import Arm, ArmContext, Search
from memora.retrieval.filters import BROAD_SHARE, NO_FILTER, Matching, Where, broad_count
from memora.retrieval.question import without_hedges
from memora.retrieval.types import ArmResult, SearchScope, TermStats
from memora.store import terms as term_counts

K1 = 1.2
B = 0.75


def idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def or_query(lexemes: Sequence[str]) -> str:
    """A tsquery, in its text form, matching any of these lexemes taken literally: each is
    quoted (quotes doubled, backslashes escaped), so no character of user text can act as
    tsquery syntax, and it is not normalised again when cast to tsquery."""
    return " | ".join("'" + x.replace("\\", "\\\\").replace("'", "''") + "'" for x in lexemes)


class KeywordIndex:
    def __init__(self, ttl: float = 300.0, max_entries: int = 200_000) -> None:
        self._avgdl: TTLCache[str, float] = TTLCache(10_000, ttl)
        self._df: TTLCache[tuple[str, str], int] = TTLCache(max_entries, ttl)
        self._lock = threading.Lock()

    def documents(self, agent_id: str) -> int | None:
        """The agent's searchable units as last counted (`stats`, cached for the TTL), or None."""
        with self._lock:
            return self._df.get((agent_id, term_counts.DOCUMENTS))

    @staticmethod
    def terms(conn: Connection[Any], query: str) -> list[str]:
        """The query's lexemes as the `english` configuration parses them."""
        row = conn.execute(
            "SELECT coalesce(array_agg(lexeme ORDER BY lexeme), '{}') AS terms "
            "FROM unnest(to_tsvector('english', %s))",
            (query,),
        ).fetchone()
        return list(row["terms"]) if row else []

    def stats(self, conn: Connection[Any], agent_id: str, terms: Sequence[str]) -> TermStats:
        """N and each term's df from the write path's counts (memora.store.terms: a few index
        entries per term), avgdl from a sample; cached for the TTL."""
        with self._lock:
            avgdl = self._avgdl.get(agent_id)
            known = {t: self._df[(agent_id, t)] for t in terms if (agent_id, t) in self._df}
            n_docs = self._df.get((agent_id, term_counts.DOCUMENTS))
        missing = [t for t in terms if t not in known]
        if missing or n_docs is None:
            counted = term_counts.frequencies(conn, agent_id, missing)
            n_docs = counted.pop(term_counts.DOCUMENTS)
            known.update(counted)
        if avgdl is None:
            sample = conn.execute(  # the average length of a sample is close enough
                "SELECT coalesce(avg(length(search_vector)), 1) AS avgdl FROM "
                "(SELECT search_vector FROM memory_search WHERE agent_id = %s LIMIT 2000) s",
                (agent_id,),
            ).fetchone()
            avgdl = max(1.0, float(sample["avgdl"] if sample else 1))
        with self._lock:
            self._avgdl[agent_id] = avgdl
            self._df[(agent_id, term_counts.DOCUMENTS)] = n_docs
            for t in missing:
                self._df[(agent_id, t)] = known[t]
        n_docs = max(n_docs, max(known.values(), default=0))
        return TermStats(
            n_docs, avgdl, {t: idf(n_docs, known[t]) for t in terms}, {t: known[t] for t in terms}
        )

    @staticmethod
    def _params(stats: TermStats) -> dict[str, Any]:
        terms = list(stats.idf)
        return {
            "terms": terms,
            "idf": [stats.idf[t] for t in terms],
            "k1": K1,
            "b": B,
            "avgdl": stats.avgdl,
        }

    def search(
        self,
        conn: Connection[Any],
        scope: SearchScope,
        *,
        stats: TermStats,
        limit: int,
        match_budget: int,
        share: float = 0.0,
    ) -> list[tuple[UUID, float]]:
        """The agent's embedded units that contain a query term, best BM25 over all terms
        first, reading at most `match_budget` postings a term.

        Unfiltered, each term's strongest `match_budget` postings (`memory_postings`,
        migration 0022: by their BM25 weight at a reference length, the newest first among
        equals) are read from their index alone and their exact weights summed: a term's
        every posting when it is that rare, else its best (`best`). A unit left out of a
        common term's best misses at most that term's weakest read weight, which a common
        term's small idf keeps small. Under the search's filters (`scope.keyword_where`),
        which the postings do not hold, it depends on `share`, the part of the agent's units
        expected to pass them (`Matching.share`, from the semantic retriever's plan): from
        BROAD_SHARE up, the best-scored units are checked against the filters by key, as many
        as `limit` needs at that share (`broad_count`; so a list can come out a little short,
        never wrong); below (or not estimated: 0), where most would fail, the filters select
        first (`_filtered`)."""
        if not stats.idf:
            return []
        where = scope.keyword_where
        if where.sql and share < BROAD_SHARE:
            return self._filtered(conn, scope, stats=stats, limit=limit, match_budget=match_budget)
        count = broad_count(limit, share) if where.sql else limit
        return self.best(
            conn, scope, stats=stats, count=count, match_budget=match_budget, where=where,
            limit=limit,
        )  # fmt: skip

    def best(
        self,
        conn: Connection[Any],
        scope: SearchScope,
        *,
        stats: TermStats,
        count: int,
        match_budget: int,
        where: Where = NO_FILTER,
        limit: int = 0,
    ) -> list[tuple[UUID, float]]:
        """The `count` units best by BM25 over each term's strongest `match_budget` postings
        (see `search`); with `where` (on `memory_search`), at most `limit` of them that pass
        it, each checked by key."""
        if not stats.idf:
            return []
        best = """
            SELECT p.unit_id AS id, sum(t.idf * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s
                       * (1 - %(b)s + %(b)s * p.dl / %(avgdl)s))) AS bm25
            FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS t(lexeme, idf)
            CROSS JOIN LATERAL (
                SELECT unit_id, tf, dl FROM memory_postings
                WHERE agent_id = %(agent)s AND lexeme = t.lexeme AND fact_type = ANY(%(types)s)
                ORDER BY impact DESC, event_date DESC LIMIT %(budget)s
            ) p
            GROUP BY p.unit_id ORDER BY bm25 DESC, p.unit_id LIMIT %(best)s"""
        if where.sql:
            best = f"""
                SELECT b.id, b.bm25 FROM ({best}) b
                WHERE EXISTS (SELECT 1 FROM memory_search
                              WHERE memory_search.unit_id = b.id {where.sql})
                ORDER BY b.bm25 DESC, b.id LIMIT %(limit)s"""
        rows = (
            conn.cursor(row_factory=tuple_row)  # (id, bm25) tuples: no dict a row
            .execute(
                best,
                {
                    **self._params(stats),
                    "budget": match_budget,
                    "agent": scope.agent_key,
                    "types": list(scope.fact_types),
                    "best": count,
                    "limit": limit,
                    **where.params,
                },
                prepare=where.prepare,
            )
            .fetchall()
        )
        return [(unit, float(bm25)) for unit, bm25 in rows]

    def _filtered(
        self,
        conn: Connection[Any],
        scope: SearchScope,
        *,
        stats: TermStats,
        limit: int,
        match_budget: int,
    ) -> list[tuple[UUID, float]]:
        """`search` under filters: at most `match_budget` matching units are scored, those
        holding the rarest terms (TermStats.matching_terms) and, when even the rarest term is
        that common, the most recent of them. The filters apply before the budget. The query
        is planned for its own tsquery every time (never prepared), so that the planner sees
        its selectivity: for a rare term it reads the GIN index, for a common one it walks the
        agent's units newest first and stops after `match_budget` matches. Prepared, after
        five runs PostgreSQL may keep a generic plan that guesses 500 matches for any tsquery,
        and then reads and sorts every unit holding a common term where the custom plan stops
        after `match_budget` (docs/retrieval.md, "The retrievers")."""
        match = stats.matching_terms(match_budget)
        if not match:
            return []
        # When the agent's matches all fit the budget (its df says so) they are all scored,
        # and without an order to keep the planner has no reason to walk the agent's units.
        newest = (
            "ORDER BY event_date DESC LIMIT %(budget)s"
            if sum(stats.df[t] for t in match) > match_budget
            else ""
        )
        lateral, params = self.lateral(stats)
        where = scope.keyword_where
        rows = conn.execute(
            f"""
            WITH matched AS MATERIALIZED (
                SELECT unit_id AS id, search_vector FROM memory_search
                WHERE agent_id = %(agent)s AND fact_type = ANY(%(types)s)
                  AND search_vector @@ %(query)s::tsquery {where.sql}
                {newest}
            )
            SELECT m.id, kw.bm25 FROM matched m CROSS JOIN LATERAL {lateral} kw
            ORDER BY kw.bm25 DESC, m.id LIMIT %(limit)s
            """,
            {
                **params,
                "query": or_query(match),
                "budget": match_budget,
                "agent": scope.agent_key,
                "types": list(scope.fact_types),
                "limit": limit,
                **where.params,
            },
            prepare=False,
        ).fetchall()
        return [(r["id"], float(r["bm25"])) for r in rows]

    def lateral(self, stats: TermStats | None) -> tuple[str, dict[str, Any]]:
        """A LATERAL subquery computing `bm25` for the unit aliased `m` (0 rows when no term
        matches), and its parameters, for queries that read units with their keyword score."""
        if stats is None or not stats.idf:
            return "(SELECT 0.0::float8 AS bm25)", {}
        # Only the query's lexemes are unnested: `setweight` marks them (weight A) and
        # `ts_filter` keeps the marked ones, both in C, so a unit's row yields its one or two
        # matching lexemes instead of all of them; the join still keeps the query's terms only
        # (a lexeme weighted A before would pass the filter).
        return (
            """(SELECT sum(terms.idf * tf.n * (%(k1)s + 1) / (tf.n + %(k1)s * (1 - %(b)s
                          + %(b)s * length(m.search_vector) / %(avgdl)s))) AS bm25
                FROM unnest(ts_filter(setweight(m.search_vector, 'A', %(terms)s::text[]),
                                      '{a}')) AS u(lexeme, positions, weights)
                JOIN unnest(%(terms)s::text[], %(idf)s::float8[]) AS terms(lexeme, idf)
                  ON terms.lexeme = u.lexeme
                CROSS JOIN LATERAL
                  (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS n) tf)""",
            self._params(stats),
        )


class KeywordArm(Arm):
    """The keyword retriever (BM25); its statistics go on the search for fusion and the trace.
    Under a filter: see `_filtered`."""

    name = "keyword"

    def __init__(self, context: ArmContext) -> None:
        super().__init__(context)
        self.index = KeywordIndex(ttl=context.settings.keyword_stats_ttl_seconds)

    def retrieve(self, search: Search) -> ArmResult:
        started = time.perf_counter()
        scope, limit = search.scope, search.per_arm
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            terms = self.index.terms(conn, without_hedges(search.query))
            stats = self.index.stats(conn, scope.agent_key, terms)
            if scope.where.sql and stats.idf:
                ranked = self._filtered(conn, scope, stats, limit, search.matching)
            else:
                ranked = self.index.search(
                    conn, scope, stats=stats, limit=limit,
                    match_budget=self.settings.keyword_match_budget,
                )  # fmt: skip
        search.term_stats = stats
        result = ArmResult(self.name, ranked, ms=round((time.perf_counter() - started) * 1000, 2))
        if not terms:
            result.note = "no searchable words in the query"
        return result

    def _filtered(
        self,
        conn: Connection[Any],
        scope: SearchScope,
        stats: TermStats,
        limit: int,
        matching: Matching,
    ) -> list[tuple[UUID, float]]:
        """Under a filter whose units' keyword index is held (`caches.filter_terms`), every
        unit that passes is ranked here. Otherwise the way depends on the share of the agent's
        units the planner expects to pass it, estimated once a search by the semantic
        retriever's plan (`matching.planned`; none: a filter few units pass). Where the units
        failing a broad filter are held (`caches.failing_units`), the unfiltered best are read
        without waiting for the plan (as many as the share makes enough: `broad_count`), and
        those that fail dropped once it has them; read further when more failed."""
        caches = self.context.caches
        if caches.terms is not None:
            held = caches.terms.refreshed(conn, scope)
            if held is not None:
                return held.best(stats.idf, stats.avgdl, limit, k1=K1, b=B)
            if caches.terms.wanted(scope):
                caches.read_later(caches.terms, scope)
        budget = self.settings.keyword_match_budget
        fails = caches.failing.count(scope) if caches.failing is not None else None
        early = None
        if fails is not None:  # most units pass: `fails` of them fail
            count = broad_count(limit, 1 - fails / max(stats.n_docs, 1), fails)
            early = self.index.best(conn, scope, stats=stats, count=count, match_budget=budget)
        matching.planned.wait()
        failing = matching.failing
        if failing is None:
            return self.index.search(
                conn, scope, stats=stats, limit=limit, match_budget=budget,
                share=matching.share or 0.0,
            )  # fmt: skip
        if early is None:  # held since this search began
            count = broad_count(limit, matching.share or 0.0, len(failing))
            early = self.index.best(conn, scope, stats=stats, count=count, match_budget=budget)
        passed = failing.outside(early)
        if len(passed) < limit and len(early) == count < limit + len(failing):
            # more of the best failed than the share made likely: as many more as fail
            count = limit + len(failing)
            early = self.index.best(conn, scope, stats=stats, count=count, match_budget=budget)
            passed = failing.outside(early)
        return passed[:limit]
