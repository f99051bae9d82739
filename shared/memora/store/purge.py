"""Hard deletes, table by table (not through ON DELETE CASCADE), so that the counts returned
are the rows really removed.

Order matters against a pipeline stage writing at the same moment: the rows a request adds to
are locked first (agents: see `agents.ensure_agent`; a document: its row), then the operations
are deleted, which waits for any stage holding its operation's row lock; a stage that comes
later finds no operation and writes nothing. Only then are units and the rest deleted, by
statements that see what such a stage committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from memora.basics.tenancy import DEFAULT_TENANT, SEPARATOR, client_agent_id
from memora.store.relations import forget_evidence

# Every table that holds an agent's data, in the order they are emptied.
PURGE_TABLES = (
    "operations",
    "memory_links",
    "unit_entities",
    "memory_access",
    "unit_sources",
    "memory_units",
    "conversation_chunks",
    "conversation_messages",
    "conversation_index_state",
    "entity_relations",
    "entities",
    "documents",
    "agents",
    "webhook_deliveries",
)


def purge_units(conn: Connection[Any], units_sql: str, params: dict[str, Any]) -> dict[str, int]:
    """Delete the units `units_sql` selects (a `SELECT id FROM memory_units ...` with named
    parameters), and their links, entity references and access counts; relations between
    entities forget them as evidence, and go where no evidence is left."""
    counts = {"entity_relations": forget_evidence(conn, units_sql, params)}
    # Links are stored in both directions, and only between units of one agent.
    counts["memory_links"] = (
        conn.execute(f"DELETE FROM memory_links WHERE from_unit IN ({units_sql})", params).rowcount
        + conn.execute(f"DELETE FROM memory_links WHERE to_unit IN ({units_sql})", params).rowcount
    )
    for table in ("unit_entities", "memory_access"):
        counts[table] = conn.execute(
            f"DELETE FROM {table} WHERE unit_id IN ({units_sql})", params
        ).rowcount
    # Sources go with their units (ON DELETE CASCADE): deleting them first would change
    # what `units_sql` selects when it reads them.
    row = conn.execute(
        f"SELECT count(*) AS n FROM unit_sources WHERE unit_id IN ({units_sql})", params
    ).fetchone()
    counts["unit_sources"] = int(row["n"]) if row else 0
    counts["memory_units"] = conn.execute(
        f"DELETE FROM memory_units WHERE id IN ({units_sql})", params
    ).rowcount
    return counts


def purge_agents(conn: Connection[Any], keys: list[str]) -> dict[str, int]:
    """Delete the agents stored under `keys` and every row of theirs; rows deleted per table.
    Run it in a transaction: the deletes and their counts are one unit."""
    counts = dict.fromkeys(PURGE_TABLES, 0)
    if not keys:
        return counts
    params = {"k": keys}
    conn.execute(
        "SELECT agent_id FROM agents WHERE agent_id = ANY(%(k)s) ORDER BY agent_id FOR UPDATE",
        params,
    )
    counts["operations"] = conn.execute(
        "DELETE FROM operations WHERE agent_id = ANY(%(k)s)", params
    ).rowcount
    counts |= purge_units(conn, "SELECT id FROM memory_units WHERE agent_id = ANY(%(k)s)", params)
    # the lifecycle's audit trail, job cursors and keyword statistics go too (not counted:
    # they are bookkeeping)
    for table in ("memory_events", "job_cursors", "memory_terms"):
        conn.execute(f"DELETE FROM {table} WHERE agent_id = ANY(%(k)s)", params)
    # of the vectors' removals, the one this purge wrote stays: a query service holding an
    # agent's filtered units learns from it that they are gone (retrieval.caches.passing_units)
    conn.execute(
        "DELETE FROM vector_removals WHERE agent_id = ANY(%(k)s) "
        "AND removed < pg_current_xact_id()::text::int8",
        params,
    )
    for table in (
        "conversation_chunks",
        "conversation_messages",
        "conversation_index_state",
        "entity_relations",
        "entities",
        "documents",
        "agents",
    ):
        counts[table] = (
            counts.get(table, 0)
            + conn.execute(f"DELETE FROM {table} WHERE agent_id = ANY(%(k)s)", params).rowcount
        )
    # the webhook events about them, sent or not (their payloads may quote what they held)
    tenants = [key.rpartition(SEPARATOR)[0] or DEFAULT_TENANT for key in keys]
    counts["webhook_deliveries"] = conn.execute(
        "DELETE FROM webhook_deliveries d USING unnest(%s::text[], %s::text[]) AS a(tenant, id) "
        "WHERE d.tenant_id = a.tenant AND d.payload -> 'data' ->> 'agent_id' = a.id",
        (tenants, [client_agent_id(key) for key in keys]),
    ).rowcount
    return counts


# Tombstones an erasure leaves on purpose: ids only, no content (the query services learn from
# it that the agent's units are gone).
TOMBSTONES = frozenset({"vector_removals"})


@dataclass(frozen=True)
class Remaining:
    """What an erasure left: rows per table still holding the subject's id (an agent's key, a
    document's id...), over every table of the schema with that column (`checked`). The tables
    keyed by a unit's id (links, entity references, access counts, sources) reference
    `memory_units` by foreign key: none outlives its unit."""

    rows: dict[str, int]
    checked: list[str]

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def remaining(conn: Connection[Any], values: list[Any], column: str = "agent_id") -> Remaining:
    """Rows still holding one of `values` in `column` (an agent's key, a document's id), over
    every table of the schema with that column."""
    tables = [
        r["relname"]
        for r in conn.execute(
            "SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE a.attname = %s AND NOT a.attisdropped AND c.relkind IN ('r', 'p') "
            "AND c.relnamespace = current_schema()::regnamespace ORDER BY c.relname",
            (column,),
        ).fetchall()
        if r["relname"] not in TOMBSTONES
    ]
    rows = {}
    for table in tables:
        row = conn.execute(
            f"SELECT count(*) AS n FROM {table} WHERE {column} = ANY(%s)", (values,)
        ).fetchone()
        if row and row["n"]:
            rows[table] = int(row["n"])
    return Remaining(rows, tables)


def message_remaining(
    conn: Connection[Any], message_pk: Any, document_pk: Any, message_id: str
) -> int:
    """What a deleted message left: rows with its id in every table with a `message_pk`
    column, chunks covering it, the message row, and its item in its document's raw content."""
    row = conn.execute(
        """
        SELECT (SELECT count(*) FROM conversation_messages WHERE id = %(m)s)
             + (SELECT count(*) FROM conversation_chunks WHERE message_pks @> ARRAY[%(m)s]::uuid[])
             + (SELECT count(*) FROM documents d, jsonb_array_elements(d.items) AS it(item)
                WHERE d.id = %(d)s AND it.item ->> 'message_id' = %(id)s) AS n
        """,
        {"m": message_pk, "d": document_pk, "id": message_id},
    ).fetchone()
    return remaining(conn, [message_pk], "message_pk").total + int(row["n"] if row else 0)
