"""The keyword retriever under filters few units pass (issue 29): its two ways against exact
BM25 over every unit that passes, for recall and cost.

    python bench/keyword_filters.py --size 100000 --questions 120

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), for each filter of `--filters` (`search_latency.FILTER_SETS`)
and the bench's questions, in process under row-level security, each call timed alone:

- "exact": BM25 of every unit that passes the filter and holds a query term (no budget);
  the truth the two ways are read against, not a way a search could afford;
- "filtered": `KeywordIndex._filtered`, the way of a search today: the filter selects the
  units holding the rarest terms (at most the match budget of them, the newest), each scored;
- "held": the unfiltered best (`KeywordIndex.best`: each term's strongest postings), as many
  as the filter's share needs for 50 and a quarter more, kept to the units that pass, which
  the query service knows once it holds the filter's units (`retrieval.caches.passing_units`);
- "passing": each term's strongest postings among the units that pass (the held units' ids
  checked inside the postings' index scan, the budget counting passing postings only), their
  exact weights summed: the unfiltered best's way, kept to the filter;
- "terms": the filter's keyword index held in the query service (`retrieval.caches.filter_terms`,
  read whole once before the questions), each call bringing it up to date (nothing changed:
  the read of what was written since) and ranking every passing unit by BM25 in the process.

Per way: recall@10 and recall@50 of the exact top 50 (the share of the exact list's units a
way found, micro-averaged over questions), the questions whose list came out shorter than the
exact one, and the median ms.
"""

from __future__ import annotations

import math
import os
import statistics
from functools import partial
from typing import Any
from uuid import UUID

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import search_latency as bench  # bench/search_latency.py: the agent, its questions and filters
from common import timed_call  # bench/common.py
from compare import guard_arguments, guard_database  # bench/compare.py: the guard's data

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.retrieval.arms.keyword import K1, B, KeywordIndex, or_query
from memora.retrieval.caches.filter_terms import FilterTerms
from memora.retrieval.filters import Filters, compile_filters, vector_scope
from memora.retrieval.types import SearchScope

LIMIT = 50


def _exact(conn: Any, index: KeywordIndex, scope: SearchScope, stats: Any, filters: Filters) -> Any:
    where = compile_filters(filters, "m")
    lateral, params = index.lateral(stats)
    rows = conn.execute(
        f"""
        SELECT m.unit_id AS id, kw.bm25 FROM memory_search m CROSS JOIN LATERAL {lateral} kw
        WHERE m.agent_id = %(agent)s AND m.fact_type = ANY(%(types)s)
          AND m.search_vector @@ %(query)s::tsquery {where.sql}
        ORDER BY kw.bm25 DESC, m.unit_id LIMIT %(limit)s
        """,
        {**params, **scope.params, **where.params, "query": or_query(list(stats.idf)),
         "limit": LIMIT},
        prepare=False,
    ).fetchall()  # fmt: skip
    return [(r["id"], float(r["bm25"])) for r in rows]


def _passing(conn: Any, scope: SearchScope) -> tuple[frozenset[str], int]:
    rows = conn.execute(
        f"SELECT m.unit_id::text AS id FROM memory_vectors m "
        f"WHERE {vector_scope('m')} {scope.where.sql}",
        {**scope.params, **scope.where.params},
        prepare=False,
    ).fetchall()
    units = conn.execute(
        f"SELECT count(*) AS n FROM memory_vectors m WHERE {vector_scope('m')}", scope.params
    ).fetchone()
    return frozenset(r["id"] for r in rows), int(units["n"])


def measure(url: str, questions: list[str], filters: list[str], budget: int) -> None:
    pool = make_pool(url, min_size=1, max_size=2, name="bench", row_security=True)
    try:
        for name in filters:
            chosen = Filters.model_validate(bench.FILTER_SETS[name])
            scope = bench.filter_scope(name)
            with pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
                print(name, _filter(conn, scope, chosen, questions, budget), flush=True)
    finally:
        pool.close()


def _filter(
    conn: Any, scope: SearchScope, chosen: Filters, questions: list[str], budget: int
) -> dict[str, Any]:
    index = KeywordIndex()
    members, units = _passing(conn, scope)
    count = math.ceil(1.25 * LIMIT * units / max(len(members), 1))  # a quarter more

    passing_ids = ",".join(sorted(members))

    def passing(stats: Any) -> list[tuple[UUID, float]]:
        params = index._params(stats)
        rows = conn.execute(
            """
            SELECT p.unit_id AS id, sum(t.idf * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s
                       * (1 - %(b)s + %(b)s * p.dl / %(avgdl)s))) AS bm25
            FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS t(lexeme, idf)
            CROSS JOIN LATERAL (
                SELECT unit_id, tf, dl FROM memory_postings
                WHERE agent_id = %(agent)s AND lexeme = t.lexeme AND fact_type = ANY(%(types)s)
                  AND unit_id = ANY(string_to_array(%(ids)s, ',')::uuid[])
                ORDER BY impact DESC, event_date DESC LIMIT %(budget)s
            ) p
            GROUP BY p.unit_id ORDER BY bm25 DESC, p.unit_id LIMIT %(limit)s""",
            {**params, "agent": scope.agent_key, "types": list(scope.fact_types),
             "ids": passing_ids, "budget": budget, "limit": LIMIT},
            prepare=False,
        ).fetchall()  # fmt: skip
        return [(r["id"], float(r["bm25"])) for r in rows]

    def held(stats: Any) -> list[tuple[UUID, float]]:
        best = index.best(conn, scope, stats=stats, count=count, match_budget=budget)
        return [(u, b) for u, b in best if str(u) in members][:LIMIT]

    held_terms = FilterTerms(1 << 30, 3600.0)
    held_terms.load(conn, scope)

    def terms(stats: Any) -> list[tuple[UUID, float]]:
        current = held_terms.refreshed(conn, scope)
        assert current is not None, "the filter's keyword index is held"
        return current.best(stats.idf, stats.avgdl, LIMIT, k1=K1, b=B)

    ways = ("filtered", "held", "passing", "terms")
    found: dict[str, list[int]] = {way: [0, 0, 0] for way in ways}
    times: dict[str, list[float]] = {way: [] for way in ("exact", *ways)}
    truth_10 = truth_50 = 0
    for question in questions:
        stats = index.stats(conn, scope.agent_key, index.terms(conn, question))
        if not stats.idf:
            continue
        exact, ms = timed_call(partial(_exact, conn, index, scope, stats, chosen))
        times["exact"].append(ms)
        filtered, ms = timed_call(
            partial(index._filtered, conn, scope, stats=stats, limit=LIMIT, match_budget=budget)
        )
        times["filtered"].append(ms)
        kept, ms = timed_call(partial(held, stats))
        times["held"].append(ms)
        chosen_postings, ms = timed_call(partial(passing, stats))
        times["passing"].append(ms)
        from_terms, ms = timed_call(partial(terms, stats))
        times["terms"].append(ms)
        top_10, top_50 = {u for u, _ in exact[:10]}, {u for u, _ in exact}
        truth_10, truth_50 = truth_10 + len(top_10), truth_50 + len(top_50)
        for way, ranked in (
            ("filtered", filtered), ("held", kept), ("passing", chosen_postings),
            ("terms", from_terms),
        ):  # fmt: skip
            ids = {u for u, _ in ranked}
            found[way][0] += len(top_10 & ids)
            found[way][1] += len(top_50 & ids)
            found[way][2] += len(ranked) < len(exact)
    return {
        "passing": len(members), "best read (held)": count,
        **{f"{way} ms": round(statistics.median(t), 2) for way, t in times.items()},
        **{f"{way} recall@10": round(f[0] / max(truth_10, 1), 3) for way, f in found.items()},
        **{f"{way} recall@50": round(f[1] / max(truth_50, 1), 3) for way, f in found.items()},
        **{f"{way} short": f[2] for way, f in found.items()},
    }  # fmt: skip


def main() -> None:
    parser = guard_arguments(
        __doc__.split("\n\n")[0],
        ["scene (5%)", "speaker (5%)", "time (4%)", "tags any (10%)", "turn range (1%)"],
    )
    parser.add_argument("--match-budget", type=int, default=Settings().keyword_match_budget)
    args = parser.parse_args()
    with guard_database(args.size, args.data_root) as url:
        measure(url, bench.questions(args.questions), args.filters, args.match_budget)


if __name__ == "__main__":
    main()
