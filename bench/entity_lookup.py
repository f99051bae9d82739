"""The entity retriever's first step on a large agent: finding the entities a query names, by
name or alias (`retrieval.arms.entity.named_entities`). The query's embedding waits for it, so
its time is on every search that names someone (issue 55; migration 0039).

On an embedded PostgreSQL migrated to head: one agent of `--entities` entities (every fifth
with an alias) beside `--small` agents of 30 entities each; each lookup names two entities
(one by an alias for the big agent), timed `--rounds` times for the big agent and a small
one. `--without-index` drops 0039's index on the aliases first.

    python bench/entity_lookup.py [--entities 30000] [--small 1000] [--without-index]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from memora.db.migrate import upgrade
from memora.infra.embedded import EmbeddedPostgres, free_port
from memora.retrieval.arms.entity import named_entities
from memora.retrieval.types import SearchParams, SearchScope

INSERT = """
    INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type, aliases,
                          first_seen, last_seen)
    SELECT %(agent)s, 'Person ' || g, 'person ' || g, 'PERSON',
           CASE WHEN g %% 5 = 0 THEN ARRAY['p' || g] ELSE '{}' END, now(), now()
    FROM generate_series(1, %(n)s) g
"""


def load(conn: psycopg.Connection, entities: int, small: int) -> None:
    for agent, n in [("big", entities), *((f"small-{i}", 30) for i in range(small))]:
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent,))
        conn.execute(INSERT, {"agent": agent, "n": n})


def lookups(conn: psycopg.Connection, agent: str, names: list[str], rounds: int) -> list[float]:
    scope = SearchScope.of(SearchParams(agent_id=agent, query=" ".join(names)))
    took = []
    for _ in range(rounds):
        started = time.perf_counter()
        found, _ = named_entities(conn, scope, names=names)
        took.append((time.perf_counter() - started) * 1000)
        assert len(found) == 2, found
    return took


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entities", type=int, default=30_000, help="the big agent's")
    parser.add_argument("--small", type=int, default=1000, help="agents of 30 entities")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--without-index", action="store_true", help="drop 0039's index")
    args = parser.parse_args(argv)
    server = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="memora-lookup-")), port=free_port())
    url = server.start()
    try:
        upgrade(url, 384)
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            load(conn, args.entities, args.small)
            if args.without_index:
                conn.execute("DROP INDEX idx_entities_aliases")
            conn.execute("VACUUM (ANALYZE)")
            big = lookups(conn, "big", ["person 7", "p10"], args.rounds)
            small = lookups(conn, "small-3", ["person 7", "person 12"], args.rounds)
    finally:
        server.stop()
    schema = "without migration 0039's index" if args.without_index else "head"
    for name, took in (("big", big), ("small", small)):
        q = statistics.quantiles(took, n=20)
        p50 = statistics.median(took)
        print(f"{schema}: {name} agent's lookup p50 {p50:.3f} ms, p95 {q[-1]:.3f}")


if __name__ == "__main__":
    main()
