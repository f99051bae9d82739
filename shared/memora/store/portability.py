"""Export and import SQL (data portability, docs/operations.md "Export and import").

Rows travel generically: an export record is the row as `to_jsonb` writes it, less the
columns the importing database derives itself (generated columns, `tenant_id`, `agent_id`),
with embeddings as lists of numbers; an import turns a record back into a row with
`jsonb_populate_record`, so PostgreSQL converts every value with its column's own type.
A column added by a later migration travels without code changes; one the importing
database lacks is refused (`UnknownColumns`), never dropped silently.

Derived tables are not carried: `memory_search` and `memory_vectors` follow `memory_units`
through their triggers (and `memory_terms` and `memory_postings` follow `memory_search`), so
imported memories are searchable at once; operations (job history) and job cursors stay
behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Connection, sql
from psycopg.types.json import Jsonb

_UNITS_OF_AGENT = "(SELECT id FROM memory_units WHERE agent_id = %(a)s)"
NOT_CARRIED = frozenset({"tenant_id", "agent_id"})


@dataclass(frozen=True)
class Table:
    """One record type: its table, the rows of an agent (`owner`: a condition on alias `t`),
    their export order, and how a re-import recognises a row it already holds: `key` (the
    primary key, whose conflicts ON CONFLICT skips) or `match` (columns compared, for a table
    whose key is a sequence number that does not travel)."""

    kind: str
    name: str
    owner: str
    order: str
    key: tuple[str, ...] = ("id",)
    match: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()  # columns that do not travel
    deferred: tuple[str, ...] = ()  # self-references, written once every row is in

    @property
    def by_agent(self) -> bool:
        return self.owner.startswith("t.agent_id")


_BY_AGENT = "t.agent_id = %(a)s"
# In dependency order: an import meets every row after those it references.
TABLES: tuple[Table, ...] = (
    Table("profile", "agents", _BY_AGENT, "t.agent_id", key=("agent_id",)),
    Table("document", "documents", _BY_AGENT, "t.created_at, t.id"),
    Table("message", "conversation_messages", _BY_AGENT, "t.document_pk, t.position, t.id"),
    Table(
        "entity",
        "entities",
        _BY_AGENT,
        "t.created_at, t.id",
        skip=("mentions_removed",),  # a transaction id of the exporting database (0023)
    ),
    Table(
        "memory",
        "memory_units",
        _BY_AGENT,
        "t.created_at, t.id",
        deferred=("supersedes", "superseded_by"),
    ),
    Table(
        "entity_relation",
        "entity_relations",
        _BY_AGENT,
        "t.valid_from, t.id",
        deferred=("superseded_by",),
    ),
    Table(
        "unit_entity",
        "unit_entities",
        f"t.unit_id IN {_UNITS_OF_AGENT}",
        "t.unit_id, t.entity_id",
        key=("unit_id", "entity_id"),
        skip=("written", "event_date"),  # its transaction id (0023); the unit's date (0031)
    ),
    Table(
        "link",
        "memory_links",
        f"t.from_unit IN {_UNITS_OF_AGENT}",
        "t.from_unit, t.to_unit, t.link_type",
        key=("from_unit", "to_unit", "link_type"),
    ),
    Table(
        "unit_source",
        "unit_sources",
        f"t.unit_id IN {_UNITS_OF_AGENT}",
        "t.unit_id, t.message_pk",
        key=("unit_id", "message_pk"),
    ),
    Table("access", "memory_access", f"t.unit_id IN {_UNITS_OF_AGENT}", "t.unit_id", ("unit_id",)),
    Table(
        "history",
        "memory_events",
        _BY_AGENT,
        "t.id",
        key=(),
        match=("unit_id", "event", "at", "actor"),
        skip=("id",),
    ),
    Table("chunk", "conversation_chunks", _BY_AGENT, "t.document_pk, t.chunk_index, t.id"),
    Table("index_state", "conversation_index_state", _BY_AGENT, "t.agent_id", ("agent_id",)),
)
BY_KIND: dict[str, Table] = {t.kind: t for t in TABLES}


@dataclass(frozen=True)
class Column:
    name: str
    vector: bool  # pgvector types: exported as a list of numbers
    generated: bool  # computed by PostgreSQL: neither exported nor written


def columns(conn: Connection[Any], table: str) -> list[Column]:
    rows = conn.execute(
        "SELECT a.attname AS name, t.typname IN ('vector', 'halfvec') AS vector, "
        "a.attgenerated <> '' AS generated "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        (table,),
    ).fetchall()
    return [Column(r["name"], r["vector"], r["generated"]) for r in rows]


def _export_query(table: Table, cols: list[Column]) -> sql.Composed:
    dropped = [c.name for c in cols if c.generated or c.name in NOT_CARRIED | set(table.skip)]
    row = sql.SQL("to_jsonb(t) - {dropped}::text[]").format(dropped=sql.Literal(dropped))
    for c in cols:
        if c.vector and c.name not in dropped:
            row = sql.SQL("{row} || jsonb_build_object({name}, t.{col}::real[])").format(
                row=row, name=sql.Literal(c.name), col=sql.Identifier(c.name)
            )
    return sql.SQL(
        "SELECT ({row})::text AS row FROM {table} t WHERE {owner} ORDER BY {order}"
    ).format(
        row=row,
        table=sql.Identifier(table.name),
        owner=sql.SQL(table.owner),  # fixed text of TABLES, never input
        order=sql.SQL(table.order),
    )


def stream_rows(conn: Connection[Any], table: Table, agent_key: str) -> Iterator[str]:
    """The agent's rows of `table`, each a JSON object (text), read through a server-side
    cursor: memory holds one batch of rows, whatever the agent's size."""
    query = _export_query(table, columns(conn, table.name))
    with conn.cursor(name=f"memora_export_{table.name}") as cur:
        cur.itersize = 500
        cur.execute(query, {"a": agent_key})
        for row in cur:
            yield row["row"]


def agent_keys(conn: Connection[Any], tenant_id: str) -> list[str]:
    """The stored keys of the tenant's agents."""
    rows = conn.execute(
        "SELECT agent_id FROM agents WHERE tenant_id = %s ORDER BY agent_id", (tenant_id,)
    ).fetchall()
    return [r["agent_id"] for r in rows]


def agent_exists(conn: Connection[Any], agent_key: str) -> bool:
    row = conn.execute("SELECT 1 FROM agents WHERE agent_id = %s", (agent_key,)).fetchone()
    return row is not None


class UnknownColumns(Exception):
    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


class Writer:
    """Writes records into one transaction, skipping rows already there (idempotent)."""

    def __init__(self, conn: Connection[Any]) -> None:
        self.conn = conn
        self._columns: dict[str, set[str]] = {}

    def _known(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {c.name for c in columns(self.conn, table) if not c.generated}
        return self._columns[table]

    def check(self, table: Table, row: Mapping[str, Any]) -> None:
        """Raises `UnknownColumns` for fields this database has no column for."""
        unknown = sorted(set(row) - self._known(table.name))
        if unknown:
            raise UnknownColumns(unknown)

    def insert(self, table: Table, rows: Sequence[Mapping[str, Any]]) -> list[str | None]:
        """Writes the rows (checked, all with the same fields; deferred columns left NULL) in
        one statement, skipping those already there. Returns one entry per row written: its
        id for a table with deferred columns, else None."""
        names = [n for n in rows[0] if n not in table.deferred]
        cols = sql.SQL(", ").join(map(sql.Identifier, names))
        query = sql.SQL(
            "INSERT INTO {t} ({cols}) SELECT {cols} "
            "FROM jsonb_populate_recordset(NULL::{t}, %(r)s) r"
        ).format(t=sql.Identifier(table.name), cols=cols)
        if table.match:
            same = sql.SQL(" AND ").join(
                sql.SQL("e.{c} = r.{c}").format(c=sql.Identifier(c)) for c in table.match
            )
            query += sql.SQL(" WHERE NOT EXISTS (SELECT 1 FROM {t} e WHERE {same})").format(
                t=sql.Identifier(table.name), same=same
            )
        returned = sql.SQL("id::text" if table.deferred else "NULL::text")
        query += sql.SQL(" ON CONFLICT DO NOTHING RETURNING {} AS id").format(returned)
        written = self.conn.execute(query, {"r": Jsonb([dict(r) for r in rows])}).fetchall()
        return [w["id"] for w in written]

    def foreign(self, table: Table, rows: Sequence[Mapping[str, Any]]) -> int:
        """How many of the rows name (by their key) a row held by another agent or tenant, once
        written: a skipped insert may have met one with the same id."""
        if not table.by_agent or not table.key:
            return 0
        same = sql.SQL(" AND ").join(
            sql.SQL("e.{c} = r.{c}").format(c=sql.Identifier(c)) for c in (*table.key, "agent_id")
        )
        query = sql.SQL(
            "SELECT count(*) AS n FROM jsonb_populate_recordset(NULL::{t}, %(r)s) r "
            "WHERE NOT EXISTS (SELECT 1 FROM {t} e WHERE {same})"
        ).format(t=sql.Identifier(table.name), same=same)
        found = self.conn.execute(query, {"r": Jsonb([dict(r) for r in rows])}).fetchone()
        return int(found["n"]) if found else 0

    def link_deferred(self, table: Table, row: Mapping[str, Any]) -> None:
        """Sets the deferred self-references of an inserted row (all rows are in by now)."""
        present = [c for c in table.deferred if row.get(c) is not None]
        if not present:
            return
        assign = sql.SQL(", ").join(
            sql.SQL("{c} = r.{c}").format(c=sql.Identifier(c)) for c in present
        )
        self.conn.execute(
            sql.SQL(
                "UPDATE {t} t SET {assign} FROM jsonb_populate_record(NULL::{t}, %(r)s) r "
                "WHERE t.id = r.id"
            ).format(t=sql.Identifier(table.name), assign=assign),
            {"r": Jsonb(dict(row))},
        )
