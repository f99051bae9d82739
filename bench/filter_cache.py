"""The units passing a filter held in the query service (issue 29, `retrieval.caches.passing_units`)
against the exact scan in PostgreSQL: what each costs a search, what a filter's first search
and a search after new writes cost, and whether the two agree.

    python bench/filter_cache.py --size 100000 --questions 120

On the guard's synthetic agent (`bench/compare.py`'s data for this checkout, loaded under
`--data-root` when missing), for each filter of `--filters` (`search_latency.FILTER_SETS`)
and the bench's questions, in process under row-level security, each call timed alone
(medians, ms): "exact scan", `exact.exact_scan` (the statement the database runs without
the held units); "held", `exact.held_scan` on the held units (a read of what changed
since, nothing, then the ranking in numpy); "first", a filter's first search (a whole read:
`--firsts` times, a new holder each time); "after writes", the first search after
`--writes` new passing units were committed (then deleted again, with the removal rows
their deletion wrote). "same" counts the questions whose 50 best units and order equal the
exact scan's.

For each filter of `--broad` (most units pass), the units failing it held instead
(`retrieval.caches.failing_units`): "first", its whole read (`--firsts` times), and "current", a
search's read of what was written since (nothing here), medians in ms.
"""

from __future__ import annotations

import os
import statistics
import uuid
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import search_latency as bench  # bench/search_latency.py: the agent, its questions and filters
from common import timed_call  # bench/common.py
from compare import guard_arguments, guard_database  # bench/compare.py: the guard's data
from psycopg.types.json import Jsonb

from memora.basics.config import Settings
from memora.db.pool import make_pool
from memora.nlp.embedding import embedder_for
from memora.retrieval.arms import exact as exact_scans
from memora.retrieval.arms.exact import EXACT_SCAN_CAP
from memora.retrieval.caches.failing_units import FailingUnits
from memora.retrieval.caches.passing_units import PassingUnits
from memora.retrieval.types import SearchScope

LIMIT = 50


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def measure(
    url: str, questions: list[str], filters: list[str], firsts: int, writes: int, broad: list[str]
) -> dict[str, dict[str, Any]]:
    settings = Settings(database_url=url, row_security=True)
    pool = make_pool(url, min_size=1, max_size=2, name="bench", row_security=True)
    vectors = embedder_for(settings, 0, queries=True).embed_queries(questions)
    report: dict[str, dict[str, Any]] = {}
    try:
        for name in filters:
            scope = bench.filter_scope(name)
            held = PassingUnits(1 << 30, 600.0)
            with pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
                report[name] = _filter(conn, scope, vectors, held, firsts)
                report[name]["after writes"] = _after_writes(pool, conn, scope, vectors, writes)
            print(name, report[name], flush=True)
        for name in broad:
            scope = bench.filter_scope(name)
            with pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
                report[name] = _failing(conn, scope, firsts, len(questions))
            print(name, report[name], flush=True)
    finally:
        pool.close()
    return report


def _failing(conn: Any, scope: SearchScope, firsts: int, reads: int) -> dict[str, Any]:
    held = FailingUnits(1 << 30, 600.0)
    first = [timed_call(lambda: held.load(conn, scope))[1] for _ in range(firsts)]
    current = [timed_call(lambda: held.refreshed(conn, scope))[1] for _ in range(reads)]
    return {
        "failing": held.count(scope),
        "first": _median(first),
        "current": _median(current),
    }


def _filter(
    conn: Any, scope: SearchScope, vectors: np.ndarray, held: PassingUnits, firsts: int
) -> dict[str, Any]:
    scan = {"limit": LIMIT, "at_most": EXACT_SCAN_CAP}
    first = [
        timed_call(lambda: PassingUnits(1 << 30, 600.0).read(conn, scope, EXACT_SCAN_CAP))[1]
        for _ in range(firsts)
    ]
    exact_ms, held_ms, same = [], [], 0
    for vector in vectors:
        exact, ms = timed_call(
            lambda v=vector: exact_scans.exact_scan(conn, scope, vector=v, **scan)
        )
        exact_ms.append(ms)
        kept, ms = timed_call(
            lambda v=vector: exact_scans.held_scan(held, conn, scope, vector=v, **scan)
        )
        held_ms.append(ms)
        if exact is None or kept is None:
            raise SystemExit("more units pass the filter than an exact scan ranks")
        same += [u for u, _ in kept.ranked] == [u for u, _ in exact.ranked]
    return {
        "units": exact.count,
        "exact scan": _median(exact_ms),
        "held": _median(held_ms),
        "first": _median(first),
        "same": f"{same}/{len(vectors)}",
    }


def _after_writes(
    pool: Any, conn: Any, scope: SearchScope, vectors: np.ndarray, writes: int
) -> float:
    """The first search after `writes` passing units were committed (median of 5 rounds)."""
    held = PassingUnits(1 << 30, 600.0)
    scan = {"limit": LIMIT, "at_most": EXACT_SCAN_CAP}
    exact_scans.held_scan(held, conn, scope, vector=vectors[0], **scan)
    row = conn.execute(
        f"SELECT m.metadata, m.event_date FROM memory_vectors m "
        f"WHERE m.agent_id = %(agent)s {scope.where.sql} LIMIT 1",
        {**scope.params, **scope.where.params},
    ).fetchone()
    times: list[float] = []
    added: list[uuid.UUID] = []
    with pool.connection() as writer:  # the owner: the bench's own rows, removed at the end
        try:
            for round_ in range(5):
                for i in range(writes):
                    unit = uuid.uuid4()
                    writer.execute(
                        "INSERT INTO memory_units (id, agent_id, text, embedding, fact_type,"
                        " event_date, mentioned_at, metadata) VALUES (%s, %s, %s, %s, 'world',"
                        " %s, %s, %s)",
                        (unit, scope.agent_key, f"bench write {round_}.{i}",
                         vectors[i % len(vectors)], row["event_date"], row["event_date"],
                         Jsonb(row["metadata"])),
                    )  # fmt: skip
                    added.append(unit)
                writer.commit()
                vector = vectors[round_ % len(vectors)]
                _, ms = timed_call(
                    lambda v=vector: exact_scans.held_scan(held, conn, scope, vector=v, **scan)
                )
                times.append(ms)
        finally:
            writer.execute("DELETE FROM memory_units WHERE id = ANY(%s)", (added,))
            writer.execute("DELETE FROM vector_removals WHERE agent_id = %s", (scope.agent_key,))
            writer.commit()
    return _median(times)


def main() -> None:
    parser = guard_arguments(
        __doc__.split("\n\n")[0],
        ["category (0.014%)", "turn range (1%)", "time (4%)", "scene (5%)", "speaker (5%)"],
    )
    parser.add_argument(
        "--broad", nargs="*", default=["type (99.9%)"], help="filters most units pass"
    )
    parser.add_argument("--firsts", type=int, default=5, help="whole reads timed per filter")
    parser.add_argument("--writes", type=int, default=10, help="units written between searches")
    args = parser.parse_args()
    with guard_database(args.size, args.data_root) as url:
        measure(
            url, bench.questions(args.questions), args.filters, args.firsts, args.writes,
            args.broad,
        )  # fmt: skip


if __name__ == "__main__":
    main()
