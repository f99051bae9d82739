"""The trash: a document taken out of every search, restorable until its retention ends and
then deleted for real (`documents.delete_stored`); and the documents whose time is up (those
in the trash, temporary chats).

A trashed document keeps all its rows. `documents.trashed_at` says it is in the trash:
conversation search and the listing leave it out. Its active and superseded units take the
status `trashed`, which takes them out of every retriever as any status but active does, each
remembering the status it had (`trashed_from`) for the restore; units forgotten or archived
before keep theirs (migration 0035).

Order, as for a hard delete (memora.store.purge): the document's row first, FOR NO KEY UPDATE
(a re-post, an append or a message edit waits; a stage inserting the document's units does
not), then its operations still queued or running, FOR SHARE (a stage writing now is waited
for; a later one waits for this commit, and the units it writes for a trashed document are
written trashed by migration 0035's trigger), then the agent's lifecycle lock (consolidation
and remember compare active units under it), then the units. A deadlock PostgreSQL breaks
(a stage batch that locks several operations of the conversation meanwhile: rare) fails the
request, which can be sent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection

from memora.store.lifecycle import lock_agent
from memora.store.rows import fetch_all

Expiry = Literal["trash", "temporary"]


@dataclass(frozen=True)
class TrashState:
    """A document, locked: its pk and when it went to the trash (None: it is live)."""

    pk: UUID
    trashed_at: datetime | None


@dataclass(frozen=True)
class Moved:
    """What a trash or a restore moved: the units by the status they left (trash: active,
    superseded; restore: trashed) or took, and the document's messages and chunks, which
    conversation search leaves out or finds again."""

    units: dict[str, list[UUID]]
    messages: int
    chunks: int

    @property
    def unit_count(self) -> int:
        return sum(len(ids) for ids in self.units.values())


@dataclass(frozen=True)
class Due:
    """A document whose time is up (`due`): its pk, its agent's stored key, its id."""

    pk: UUID
    agent_id: str
    document_id: str


def lock(conn: Connection[Any], agent_key: str, document_id: str) -> TrashState | None:
    """The document, locked FOR NO KEY UPDATE until the transaction ends; None: no such one."""
    row = conn.execute(
        "SELECT id, trashed_at FROM documents WHERE agent_id = %s AND document_id = %s "
        "FOR NO KEY UPDATE",
        (agent_key, document_id),
    ).fetchone()
    return None if row is None else TrashState(row["id"], row["trashed_at"])


def _settle(conn: Connection[Any], agent_key: str, document_pk: UUID) -> None:
    """Wait for the stages writing the document's units now, keep later ones waiting until
    the commit, and take the agent's lifecycle lock. The running operations first: a stage
    that ends its embedding releases the append held after it (memora.store.append_operations)
    while it holds its own; waiting for it before taking the held one cannot deadlock with it.
    The second statement takes every unfinished one, those that started meanwhile included."""
    for statuses in (["running"], ["queued", "running"]):
        conn.execute(
            "SELECT id FROM operations WHERE document_pk = %s AND status = ANY(%s) "
            "ORDER BY id FOR SHARE",
            (document_pk, statuses),
        )
    lock_agent(conn, agent_key)


def _rows(conn: Connection[Any], document_pk: UUID) -> tuple[int, int]:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM conversation_messages WHERE document_pk = %(d)s) AS m, "
        "(SELECT count(*) FROM conversation_chunks WHERE document_pk = %(d)s) AS c",
        {"d": document_pk},
    ).fetchone()
    return (int(row["m"]), int(row["c"])) if row else (0, 0)


def _by_status(rows: list[dict[str, Any]], column: str) -> dict[str, list[UUID]]:
    out: dict[str, list[UUID]] = {}
    for r in rows:
        out.setdefault(r[column], []).append(r["id"])
    return out


def trash(conn: Connection[Any], agent_key: str, document_pk: UUID, at: datetime) -> Moved:
    """Put a live document (`lock`ed) in the trash at `at`, with its active and superseded
    units."""
    _settle(conn, agent_key, document_pk)
    conn.execute("UPDATE documents SET trashed_at = %s WHERE id = %s", (at, document_pk))
    rows = conn.execute(
        """
        UPDATE memory_units SET trashed_from = status, status = 'trashed', status_at = %(at)s
        WHERE document_pk = %(d)s AND status IN ('active', 'superseded')
        RETURNING id, trashed_from
        """,
        {"at": at, "d": document_pk},
    ).fetchall()
    return Moved(_by_status(rows, "trashed_from"), *_rows(conn, document_pk))


def restore(conn: Connection[Any], agent_key: str, document_pk: UUID, at: datetime) -> Moved:
    """Take a trashed document (`lock`ed) out of the trash, its units back to the status each
    had."""
    _settle(conn, agent_key, document_pk)
    conn.execute("UPDATE documents SET trashed_at = NULL WHERE id = %s", (document_pk,))
    rows = conn.execute(
        """
        UPDATE memory_units SET status = trashed_from, trashed_from = NULL, status_at = %(at)s
        WHERE document_pk = %(d)s AND status = 'trashed'
        RETURNING id, status
        """,
        {"at": at, "d": document_pk},
    ).fetchall()
    return Moved(_by_status(rows, "status"), *_rows(conn, document_pk))


def trashed_document(conn: Connection[Any], agent_key: str, unit_id: UUID) -> str | None:
    """The id of the unit's document when that document is in the trash, else None."""
    row = conn.execute(
        "SELECT d.document_id FROM memory_units u JOIN documents d ON d.id = u.document_pk "
        "WHERE u.id = %s AND u.agent_id = %s AND d.trashed_at IS NOT NULL",
        (unit_id, agent_key),
    ).fetchone()
    return None if row is None else str(row["document_id"])


# ------------------------------------------------------------------------------ expiry
# What makes a document due, with the time it is measured from: in the trash since before
# `before`; a temporary chat (messages, none of them remembered) unchanged since before it.
_DUE: dict[Expiry, tuple[str, str]] = {
    "trash": ("d.trashed_at < %(before)s", "d.trashed_at"),
    "temporary": (
        "d.updated_at < %(before)s"
        " AND d.id IN (SELECT t.document_pk FROM conversation_messages t WHERE NOT t.remember)"
        " AND NOT EXISTS (SELECT 1 FROM conversation_messages m"
        "                 WHERE m.document_pk = d.id AND m.remember)",
        "d.updated_at",
    ),
}


def due(
    conn: Connection[Any],
    expiry: Expiry,
    before: datetime,
    limit: int,
    *,
    agent_key: str | None = None,
) -> list[Due]:
    """The documents due for `expiry` (of one agent, or of all: None), oldest first."""
    condition, since = _DUE[expiry]
    agent = " AND d.agent_id = %(a)s" if agent_key is not None else ""
    return fetch_all(
        conn,
        Due,
        f"SELECT d.id AS pk, d.agent_id, d.document_id FROM documents d "
        f"WHERE {condition}{agent} ORDER BY {since}, d.id LIMIT %(n)s",
        {"before": before, "a": agent_key, "n": limit},
    )


def still_due(conn: Connection[Any], expiry: Expiry, document_pk: UUID, before: datetime) -> bool:
    """Whether the document is still due (it may have been restored, or written to, since
    `due` listed it), locked FOR NO KEY UPDATE when it is."""
    condition, _ = _DUE[expiry]
    row = conn.execute(
        f"SELECT d.id FROM documents d WHERE d.id = %(d)s AND {condition} FOR NO KEY UPDATE OF d",
        {"d": document_pk, "before": before},
    ).fetchone()
    return row is not None
