"""Export an agent (or a tenant's agents) as NDJSON and import such a file into another
server, without re-running extraction (docs/operations.md "Export and import").

The export reads one snapshot (a repeatable-read transaction) through server-side cursors,
so a large agent streams in constant memory. The import runs in one transaction: a bad line
rolls everything back, and a re-import of the same file leaves every row as it is.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.errors import Conflict, NotFound
from memora.basics.tenancy import Scope
from memora.interchange.portable import (
    FORMAT,
    VERSION,
    BadLine,
    ConflictingLine,
    Header,
    Reader,
    Record,
)
from memora.pipeline.context import AppContext
from memora.store import portability
from memora.store.portability import BY_KIND, TABLES, UnknownColumns, Writer

CHUNK_CHARS = 256 * 1024
BATCH_ROWS = 500  # rows an import writes in one statement
# what a row's values can cause (bad values, broken references); others (the database gone)
# are not the file's fault and go up
ROW_ERRORS = (psycopg.DataError, psycopg.IntegrityError)


def _line(kind: str, row_json: str) -> str:
    """A record line: its type first, then the row's columns (JSON text from PostgreSQL)."""
    inner = row_json.strip()[1:-1].strip()
    return f'{{"type": "{kind}"' + (f", {inner}" if inner else "") + "}\n"


def header_line(settings: Settings, agent_id: str | None) -> str:
    return (
        json.dumps(
            {
                "type": "header",
                "format": FORMAT,
                "version": VERSION,
                "agent_id": agent_id,
                "embedding_model": settings.embedding_model,
                "dimension": settings.embedding_dim,
                "exported_at": datetime.now(UTC).isoformat(),
            }
        )
        + "\n"
    )


def _section(conn: Connection[Any], scope: Scope, key: str, counts: Counter[str]) -> Iterator[str]:
    for table in TABLES:
        for row in portability.stream_rows(conn, table, key):
            if table.kind == "profile":  # the agent as its client names it
                identity = json.dumps({"agent_id": scope.agent_id(key)})[1:-1]
                row = "{" + identity + ", " + row.strip()[1:]
            counts[table.kind] += 1
            yield _line(table.kind, row)


def require_agent(app: AppContext, scope: Scope, agent_id: str) -> None:
    """Raises NotFound unless the agent exists (checked before an export starts streaming)."""
    with app.pool.tenant_connection(scope.tenant_id) as conn:
        if not portability.agent_exists(conn, scope.key(agent_id)):
            raise NotFound("agent_not_found", f"no agent {agent_id!r}")


def export_chunks(app: AppContext, scope: Scope, agent_id: str | None) -> Iterator[str]:
    """`export_lines` gathered into pieces of about CHUNK_CHARS: each piece a response sends
    costs a hop to the event loop, so whole lines go in bulk."""
    pending: list[str] = []
    size = 0
    for line in export_lines(app, scope, agent_id):
        pending.append(line)
        size += len(line)
        if size >= CHUNK_CHARS:
            yield "".join(pending)
            pending, size = [], 0
    if pending:
        yield "".join(pending)


def export_lines(app: AppContext, scope: Scope, agent_id: str | None) -> Iterator[str]:
    """The export's lines: of `agent_id`, or of every agent of the tenant when None."""
    counts: Counter[str] = Counter()
    with app.pool.tenant_connection(scope.tenant_id) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot
        yield header_line(app.following(), agent_id)
        if agent_id is not None:
            keys = [scope.key(agent_id)]
        else:
            keys = portability.agent_keys(conn, scope.tenant_id)
        for key in keys:
            yield from _section(conn, scope, key, counts)
        yield json.dumps({"type": "end", "counts": dict(counts)}) + "\n"


@dataclass
class ImportSummary:
    agents: list[str] = field(default_factory=list)
    imported: Counter[str] = field(default_factory=Counter)  # rows written
    unchanged: Counter[str] = field(default_factory=Counter)  # rows already there


def _check_embeddings(header: Header, settings: Settings) -> None:
    if (header.embedding_model, header.dimension) != (
        settings.embedding_model,
        settings.embedding_dim,
    ):
        raise Conflict(
            "embedding_mismatch",
            f"line 1: the export's embeddings are {header.embedding_model!r} "
            f"({header.dimension}-d); this server uses {settings.embedding_model!r} "
            f"({settings.embedding_dim}-d). Import into a server with the same model",
            {"line": 1},
        )


def _row(scope: Scope, record: Record) -> dict[str, Any]:
    """The row to write: the file's columns, the agent and tenant of this server's caller."""
    table = BY_KIND[record.kind]
    row = {k: v for k, v in record.row.items() if k not in portability.NOT_CARRIED}
    if table.by_agent:
        row["agent_id"] = scope.key(record.agent_id)
    if record.kind == "profile":
        row["tenant_id"] = scope.tenant_id
    return row


class _Foreign(Exception):
    """A batch met rows of another agent or tenant (found again row by row, for the line)."""


@dataclass
class _Importer:
    """Writes records in batches of one type (BATCH_ROWS, one statement each); a batch that
    fails is undone (a savepoint) and written again row by row, to name the failing line."""

    writer: Writer
    scope: Scope
    summary: ImportSummary = field(default_factory=ImportSummary)
    deferred: list[Record] = field(default_factory=list)  # rows' ids and self-references
    batch: list[Record] = field(default_factory=list)

    def add(self, record: Record) -> None:
        first = self.batch[0] if self.batch else None
        if first is not None and (
            (first.kind, first.agent_id, first.row.keys())
            != (record.kind, record.agent_id, record.row.keys())
            or len(self.batch) >= BATCH_ROWS
        ):
            self.flush()
        self.batch.append(record)

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if batch:
            self._write(batch)

    def _write(self, batch: list[Record]) -> None:
        table = BY_KIND[batch[0].kind]
        rows = [_row(self.scope, r) for r in batch]
        for record, row in zip(batch, rows, strict=True):
            try:
                self.writer.check(table, row)
            except UnknownColumns as exc:
                problem = f"{record.kind}: this server has no column {exc} (upgrade it first)"
                raise BadLine(record.line, problem) from None
        try:
            with self.writer.conn.transaction():  # a savepoint
                written = self.writer.insert(table, rows)
                if len(written) < len(rows) and self.writer.foreign(table, rows):
                    raise _Foreign
        except (*ROW_ERRORS, _Foreign) as exc:
            if len(batch) > 1:
                for record in batch:
                    self._write([record])
            elif isinstance(exc, _Foreign):
                raise ConflictingLine(
                    batch[0].line,
                    f"{batch[0].kind} {batch[0].row.get('id')} already exists under another "
                    "agent or tenant on this server",
                ) from None
            else:
                problem = exc.diag.message_primary or str(exc)
                raise BadLine(batch[0].line, f"{batch[0].kind}: {problem}") from None
            return
        self._count(batch, written)

    def _count(self, batch: list[Record], written: list[str | None]) -> None:
        kind, table = batch[0].kind, BY_KIND[batch[0].kind]
        skipped = len(batch) - len(written)
        if written:
            self.summary.imported[kind] += len(written)
        if skipped:
            self.summary.unchanged[kind] += skipped
        if kind == "profile":
            self.summary.agents.extend(r.agent_id for r in batch)
        new = {str(UUID(w)) for w in written if w}
        for r in batch:
            links = {c: r.row[c] for c in table.deferred if r.row.get(c)}
            if links and str(UUID(r.row["id"])) in new:
                self.deferred.append(
                    Record(r.line, r.kind, r.agent_id, {"id": r.row["id"], **links})
                )

    def link_deferred(self) -> None:
        """Self-references (an opinion's versions), once every row they may name is in."""
        for record in self.deferred:
            try:
                self.writer.link_deferred(BY_KIND[record.kind], _row(self.scope, record))
            except ROW_ERRORS as exc:
                raise BadLine(record.line, f"{record.kind}: {exc.diag.message_primary}") from None


def import_lines(app: AppContext, scope: Scope, lines: Iterable[bytes | str]) -> ImportSummary:
    """Imports an export into `scope`'s tenant in one transaction; nothing stays of a file
    that fails (BadLine names the line, Conflict a different embedding model)."""
    reader = Reader(lines)
    with app.pool.tenant_connection(scope.tenant_id) as conn, conn.transaction():
        importer = _Importer(Writer(conn), scope)
        checked = False
        for record in reader.records():
            if not checked and reader.header is not None:
                _check_embeddings(reader.header, app.following())
                checked = True
            importer.add(record)
        importer.flush()
        importer.link_deferred()
    return importer.summary
