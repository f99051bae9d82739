"""Deletes beside a big agent (issue 55): deleting a small agent's conversation, and the small
agent itself, should cost what they delete, not what the database holds.

    python bench/deletes.py                          # one agent of 200k units beside
    python bench/deletes.py --big 1000000 --without-indexes   # migration 0033's indexes dropped

On an embedded PostgreSQL migrated to head: a big agent of `--big` units in one document, as
many operations, and entity links chaining its units (one entity); then small agents, each of
`--documents` conversations of 60 units, each conversation with an operation and an entity
mentioned by all its units. Rows are written by SQL (the pipeline is not what is measured),
then VACUUM (ANALYZE). Timed, each in its own transaction as the API runs them: a small
agent's conversation deleted (`memora.store.documents.delete_document`: its rows, orphaned
entities, the receipt's check) and a small agent deleted (`memora.store.purge.purge_agents` and
its receipt's check). `--without-indexes` drops the four indexes of migration 0033 first (the
schema before it).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memora.basics.tenancy import DEFAULT_TENANT, Scope
from memora.db.migrate import upgrade
from memora.infra.embedded import EmbeddedPostgres, free_port
from memora.store import documents, purge

MIGRATION_0033 = (
    "idx_operations_document",
    "idx_memory_units_superseded_by",
    "idx_memory_links_entity",
    "idx_job_cursors_agent",
)
UNITS = (
    "INSERT INTO memory_units (agent_id, document_pk, seq, text, fact_type, event_date, "
    "mentioned_at) SELECT %(a)s, %(d)s, g, %(t)s || g, 'world', now(), now() "
    "FROM generate_series(1, %(n)s) g"
)
ENTITY = (
    "INSERT INTO entities (agent_id, canonical_name, normalized_name, entity_type, first_seen, "
    "last_seen) VALUES (%s, %s, %s, 'ORGANIZATION', now(), now()) RETURNING id"
)


def _document(conn: Any, agent: str, name: str) -> Any:
    return conn.execute(
        "INSERT INTO documents (agent_id, document_id, content_hash, items, item_count) "
        "VALUES (%s, %s, 'h', '[]', 0) RETURNING id",
        (agent, name),
    ).fetchone()["id"]


def load(conn: Any, big: int, small_agents: int, per_agent: int) -> list[str]:
    """The big agent and the small ones; the small agents' keys."""
    scope = Scope(DEFAULT_TENANT)
    key = scope.key("big")
    conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (key,))
    doc = _document(conn, key, "archive")
    conn.execute(UNITS, {"a": key, "d": doc, "t": "archived turn ", "n": big})
    conn.execute(
        "INSERT INTO operations (agent_id, kind, document_pk) "
        "SELECT %s, 'ingest', %s FROM generate_series(1, %s)",
        (key, doc, big),
    )
    entity = conn.execute(ENTITY, (key, "Northwind", "northwind")).fetchone()["id"]
    conn.execute(
        "INSERT INTO memory_links (from_unit, to_unit, link_type, weight, entity_id) "
        "SELECT id, lead(id) OVER (ORDER BY seq), 'entity', 1, %s FROM memory_units "
        "WHERE agent_id = %s ORDER BY seq LIMIT %s",
        (entity, key, big - 1),
    )
    keys = []
    for a in range(small_agents):
        small = scope.key(f"small-{a}")
        conn.execute("INSERT INTO agents (agent_id) VALUES (%s)", (small,))
        for i in range(per_agent):
            doc = _document(conn, small, f"chat-{i}")
            conn.execute(UNITS, {"a": small, "d": doc, "t": f"turn of chat {i}: ", "n": 60})
            conn.execute(
                "INSERT INTO operations (agent_id, kind, document_pk) VALUES (%s, 'ingest', %s)",
                (small, doc),
            )
            ent = conn.execute(ENTITY, (small, f"Place {i}", f"place {i}")).fetchone()["id"]
            conn.execute(
                "INSERT INTO unit_entities (unit_id, entity_id, mention) "
                "SELECT id, %s, 'place' FROM memory_units WHERE document_pk = %s",
                (ent, doc),
            )
        keys.append(small)
    return keys


def timed(conn: Any, action: Any) -> float:
    start = time.perf_counter()
    with conn.transaction():
        action()
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--big", type=int, default=200_000, help="units of the big agent")
    parser.add_argument("--agents", type=int, default=3, help="small agents (one deleted each)")
    parser.add_argument("--documents", type=int, default=4, help="conversations a small agent")
    parser.add_argument("--without-indexes", action="store_true", help="drop 0033's indexes")
    args = parser.parse_args(argv)
    server = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="memora-deletes-")), port=free_port())
    url = server.start()
    try:
        upgrade(url, 384)
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            started = time.perf_counter()
            keys = load(conn, args.big, args.agents, args.documents)
            print(f"loaded {args.big:,} units beside in {time.perf_counter() - started:.1f} s")
            for name in MIGRATION_0033 if args.without_indexes else ():
                conn.execute(f"DROP INDEX {name}")
            conn.execute("VACUUM (ANALYZE)")
            scope = Scope(DEFAULT_TENANT)
            conversation = [
                timed(conn, lambda k=k: documents.delete_document(conn, scope, k, "chat-0"))
                for k in keys
            ]
            agent = [
                timed(conn, lambda k=k: (purge.purge_agents(conn, [k]), purge.remaining(conn, [k])))
                for k in keys
            ]
    finally:
        server.stop()
    schema = "without migration 0033's indexes" if args.without_indexes else "head"
    print(
        f"{schema}, beside {args.big:,} units: delete a 60-unit conversation, ms "
        f"{[round(x, 1) for x in conversation]} (median {statistics.median(conversation):.1f})"
    )
    print(
        f"delete a small agent of {args.documents - 1} such conversations, ms "
        f"{[round(x, 1) for x in agent]} (median {statistics.median(agent):.1f})"
    )


if __name__ == "__main__":
    main()
