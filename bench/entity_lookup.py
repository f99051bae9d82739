"""Looking up an agent's entities by name on a large agent (issue 55; migrations 0039, 0040):
the entity retriever's first step, the entities a query names by name or alias
(`retrieval.arms.entity.named_entities`: the query's embedding waits for it, on every search
naming someone), entity resolution's two reads, under the agent's lock, in every stage
run that resolves mentions (`store.entities.candidates`, `store.entities.people`), and the
entity view's lookup by name (`store.graph.find_entity`, `GET /api/agents/{id}/entities/{name}`).

On an embedded PostgreSQL migrated to head: one agent of `--entities` entities (every fifth
with an alias) beside `--small` agents of 30 entities each; each lookup names two entities
(one by its name, one by an alias), timed `--rounds` times for the big agent and a small
one. `--without-index` drops 0039's and 0040's indexes first.

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
from memora.store import entities
from memora.store.graph import find_entity

INDEXES = ("idx_entities_aliases", "idx_entities_person_name_ends")  # 0039, 0040

# names of two words, as unlike each other as people's (a shared prefix would make every
# name trigram-similar to every other)
NAME = "substr(md5(%(agent)s || g), 1, 6) || ' ' || substr(md5(%(agent)s || g), 7, 8)"
ALIAS = "substr(md5(%(agent)s || g), 15, 7)"
INSERT = f"""
    INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type, aliases,
                          first_seen, last_seen)
    SELECT %(agent)s, {NAME}, {NAME}, 'PERSON',
           CASE WHEN g %% 5 = 0 THEN ARRAY[{ALIAS}] ELSE '{{}}' END, now(), now()
    FROM generate_series(1, %(n)s) g
"""


def names(conn: psycopg.Connection, agent: str) -> list[str]:
    """The name of the agent's 7th entity and the alias of its 10th."""
    row = conn.execute(
        f"SELECT (SELECT {NAME} FROM (SELECT 7 AS g) s) AS name, "
        f"(SELECT {ALIAS} FROM (SELECT 10 AS g) s) AS alias",
        {"agent": agent},
    ).fetchone()
    assert row is not None
    return [row["name"], row["alias"]]


def load(conn: psycopg.Connection, entities: int, small: int) -> None:
    for agent, n in [("big", entities), *((f"small-{i}", 30) for i in range(small))]:
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (agent,))
        conn.execute(INSERT, {"agent": agent, "n": n})


def lookups(
    conn: psycopg.Connection, agent: str, names: list[str], rounds: int
) -> dict[str, list[float]]:
    """ms of each lookup, `rounds` times: the search's, and entity resolution's two."""
    scope = SearchScope.of(SearchParams(agent_id=agent, query=" ".join(names)))
    firsts, lasts = [n.split()[0] for n in names], [n.split()[-1] for n in names]
    calls = {
        "search: the entities a query names": lambda: named_entities(conn, scope, names=names)[0],
        "ingest: names like the mentions'": lambda: entities.candidates(conn, agent, names),
        "ingest: people by first or last name": lambda: entities.people(conn, agent, firsts, lasts),
        "entity view: one by its alias": lambda: list(
            filter(None, [find_entity(conn, agent, names[-1])])
        ),
    }
    took: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            started = time.perf_counter()
            found = call()
            took[name].append((time.perf_counter() - started) * 1000)
            assert len(found) >= 1, (name, found)
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
            for index in INDEXES if args.without_index else ():
                conn.execute(f"DROP INDEX {index}")
            conn.execute("VACUUM (ANALYZE)")
            big = lookups(conn, "big", names(conn, "big"), args.rounds)
            small = lookups(conn, "small-3", names(conn, "small-3"), args.rounds)
    finally:
        server.stop()
    schema = "without migrations 0039 and 0040's indexes" if args.without_index else "head"
    print(f"{schema}; ms, p50 / p95")
    for agent, timings in (("big", big), ("small", small)):
        for name, took in timings.items():
            p95 = statistics.quantiles(took, n=20)[-1]
            print(f"  {agent:5s} {name:40s} {statistics.median(took):7.3f} / {p95:7.3f}")


if __name__ == "__main__":
    main()
