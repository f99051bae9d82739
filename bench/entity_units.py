"""The entity retriever's second half alone (issue 29): how close its units are to every
mention compared exactly, and what a call costs the query service and the database.

    python bench/entity_units.py --size 100000 --questions 120

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), for every question naming one of the agent's entities and each
filter of `--filters` (`search_latency.FILTER_SETS`; "none": unfiltered), `entity_arm.entity_units`
as a search calls it when nothing is known of who passes the filter (the walked filter's way),
with the mentions held in memory warmed by a first pass over the questions (each call then
has the embeddings it compared in PostgreSQL read and held, untimed, as a search has them
read in the background). The reference:
every mention of the named entities compared with its embedding in PostgreSQL, the filter in
SQL, the `per_entity` most similar of each. Recall is the share of the reference's units
kept; "same" the share of calls whose units and order are the reference's. Times: the
call's wall time and the CPU of the calling thread (service), medians and p95 over the timed
pass, and its PostgreSQL backend's CPU over that pass a call (database: the kernel counts it
in 10 ms ticks); the first (cold) pass's wall median too.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psutil
import search_latency as bench  # bench/search_latency.py: the agent, its questions and filters
from compare import guard_arguments, guard_database  # bench/compare.py: the guard's data

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.nlp.embedding import embedder_for
from memora.retrieval import expansion
from memora.retrieval.arms import entity as entity_arm
from memora.retrieval.caches.mentions import MentionSignatures, Unheld
from memora.retrieval.filters import vector_scope
from memora.retrieval.types import SearchScope

# every mention of each entity compared in PostgreSQL, the filter in SQL
REFERENCE = """
    SELECT u.id, max(u.sim) AS sim FROM unnest(%(entities)s::uuid[]) AS e(entity)
    CROSS JOIN LATERAL (
        SELECT m.unit_id AS id, 1 - (m.embedding <=> %(v)s::halfvec) AS sim
        FROM unit_entities ue JOIN memory_vectors m ON m.unit_id = ue.unit_id
        WHERE ue.entity_id = e.entity AND {scope} {where}
        ORDER BY sim DESC, m.unit_id LIMIT %(per_entity)s
    ) u GROUP BY u.id
"""


def measure(url: str, questions: list[str], filters: list[str]) -> dict[str, dict[str, Any]]:
    settings = Settings(database_url=url, row_security=True)
    pool = make_pool(url, min_size=1, max_size=2, name="bench", row_security=True)
    embedder = embedder_for(settings, 0, queries=True)
    held = MentionSignatures(settings.entity_signature_cache_mb << 20, 600.0)
    report: dict[str, dict[str, Any]] = {}
    try:
        with pool.tenant_connection("default", autocommit=True) as conn:
            backend = psutil.Process(conn.execute("SELECT pg_backend_pid() AS p").fetchone()["p"])
            calls = _calls(conn, questions, settings, embedder)
            for name in filters:
                cold = [_call(conn, held, call, name)[1] for call in calls]
                before = backend.cpu_times()
                timed = [_call(conn, held, call, name) for call in calls]
                after = backend.cpu_times()
                database = after.user + after.system - before.user - before.system
                report[name] = _summary(conn, calls, timed, cold, name)
                report[name]["database CPU ms (mean)"] = round(database * 1000 / len(calls), 2)
                print(name, report[name], flush=True)
    finally:
        pool.close()
    return report


def _calls(conn: Any, questions: list[str], s: Settings, embedder: Any) -> list[dict[str, Any]]:
    """The questions naming the agent's entities, as `entity_units`' arguments."""
    calls = []
    for question in questions:
        scope = bench.filter_scope("none", question)
        named = entity_arm.query_entities(conn, scope, names=expansion.phrases(question))
        if not named:
            continue
        names = {n for matched in named.values() for n in matched}
        vector = embedder.embed_queries([expansion.without_names(question, names)])[0]
        calls.append({
            "question": question, "entity_ids": list(named), "vector": vector,
            "per_entity": s.entity_units_per_entity, "min_similarity": s.entity_min_similarity,
            "exact_max": s.filter_exact_scan_max,
        })  # fmt: skip
    return calls


def _scope(call: dict[str, Any], name: str) -> SearchScope:
    return bench.filter_scope(name, call["question"])


def _call(
    conn: Any, held: MentionSignatures, call: dict[str, Any], name: str
) -> tuple[list[Any], float, float]:
    """(units, wall ms, service CPU ms) of one call, as a search makes it: the mentions whose
    embeddings are not held compared by PostgreSQL, then read and held (as the query service
    does in the background: not timed)."""
    kwargs = {k: v for k, v in call.items() if k != "question"}
    unheld: list[Unheld] = []
    service = time.thread_time()
    started = time.perf_counter()
    found = entity_arm.entity_units(
        conn, _scope(call, name), mentions=held, unheld=unheld, **kwargs
    )
    wall = (time.perf_counter() - started) * 1000
    service_ms = (time.thread_time() - service) * 1000
    held.hold(conn, unheld)
    return [u for u, _ in found], wall, service_ms


def _reference(conn: Any, call: dict[str, Any], name: str) -> list[Any]:
    scope = _scope(call, name)
    rows = conn.execute(
        REFERENCE.format(scope=vector_scope("m"), where=scope.where.sql),
        {"entities": call["entity_ids"], "v": call["vector"], "per_entity": call["per_entity"]}
        | scope.params
        | scope.where.params,
    ).fetchall()
    return [u for u, _ in entity_arm.best(rows, call["min_similarity"])]


def _summary(
    conn: Any, calls: list[dict[str, Any]], timed: list[Any], cold: list[float], name: str
) -> dict[str, Any]:
    recall, same = [], 0
    for call, (units, *_) in zip(calls, timed, strict=True):
        reference = _reference(conn, call, name)
        same += units == reference
        if reference:
            recall.append(len(set(units) & set(reference)) / len(reference))

    def spread(values: list[float]) -> str:
        p95 = statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]
        return f"{statistics.median(values):.2f} / {p95:.2f}"

    return {
        "calls": len(calls),
        "recall": round(statistics.mean(recall), 4) if recall else None,
        "same": round(same / len(calls), 3),
        "wall ms (median / p95)": spread([t[1] for t in timed]),
        "service CPU ms": spread([t[2] for t in timed]),
        "cold pass wall ms (median)": round(statistics.median(cold), 2),
    }


def main() -> None:
    parser = guard_arguments(
        __doc__.split("\n\n")[0], ["none", "type (99.9%)", "tags any (10%)", "time (4%)"]
    )
    args = parser.parse_args()
    with guard_database(args.size, args.data_root) as url:
        measure(url, bench.questions(args.questions), args.filters)


if __name__ == "__main__":
    main()
