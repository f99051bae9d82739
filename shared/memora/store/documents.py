"""Documents: the raw content of each accepted batch, kept verbatim.

Functions a request calls take its `Scope` and the client's agent id; `get_document` serves the
pipeline, which knows stored agent keys and document pks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from memora.basics.tenancy import Scope
from memora.store import entities
from memora.store.purge import purge_units, remaining

Outcome = Literal["created", "unchanged", "replaced"]
# The content hash of a document appended to: computed when a whole post compares with it, so
# that an append does not read and hash the whole conversation.
UNHASHED = ""


@dataclass(frozen=True)
class StoredDocument:
    pk: UUID
    document_id: str
    outcome: Outcome
    operation_id: UUID | None  # the operation already processing it, when unchanged
    retitled: bool = False  # replaced with another title
    trashed: bool = False  # in the trash: left as it was (the caller refuses the post)


def content_hash(items: list[dict[str, Any]], title: str | None = None) -> str:
    """The hash of the items (and of the title, when there is one: untitled documents keep
    the hash they had before titles existed)."""
    content: Any = items if title is None else {"items": items, "title": title}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def upsert_document(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    document_id: str,
    items: list[dict[str, Any]],
    title: str | None = None,
) -> StoredDocument:
    """Insert, or detect an identical re-post, or replace changed content (same document_id)."""
    return _upsert(conn, scope.key(agent_id), document_id, items, title)


def _upsert(
    conn: Connection[Any],
    agent_key: str,
    document_id: str,
    items: list[dict[str, Any]],
    title: str | None,
) -> StoredDocument:
    digest = content_hash(items, title)
    row = conn.execute(
        "SELECT id, content_hash, current_operation_id, title, trashed_at FROM documents "
        "WHERE agent_id = %s AND document_id = %s FOR UPDATE",
        (agent_key, document_id),
    ).fetchone()
    if row is not None and row["trashed_at"] is not None:
        return StoredDocument(
            row["id"], document_id, "unchanged", row["current_operation_id"], trashed=True
        )
    if row is not None and row["content_hash"] == UNHASHED:
        row["content_hash"] = content_hash(items_of(conn, row["id"]), row["title"])
    if row is not None and row["content_hash"] == digest:
        return StoredDocument(row["id"], document_id, "unchanged", row["current_operation_id"])
    if row is not None:
        conn.execute(
            "UPDATE documents SET content_hash = %s, items = %s, item_count = %s, title = %s, "
            "updated_at = now() WHERE id = %s",
            (digest, Jsonb(items), len(items), title, row["id"]),
        )
        return StoredDocument(row["id"], document_id, "replaced", None, row["title"] != title)
    inserted = conn.execute(
        """
        INSERT INTO documents (agent_id, document_id, content_hash, items, item_count, title)
        VALUES (%s, %s, %s, %s, %s, %s)
        ON CONFLICT (agent_id, document_id) DO NOTHING
        RETURNING id
        """,
        (agent_key, document_id, digest, Jsonb(items), len(items), title),
    ).fetchone()
    if inserted is None:  # a concurrent request created it first: compare again under its lock
        return _upsert(conn, agent_key, document_id, items, title)
    return StoredDocument(inserted["id"], document_id, "created", None)


def replace_items(
    conn: Connection[Any], document_pk: UUID, items: list[dict[str, Any]], title: str | None
) -> None:
    """New items (and title) for a document: an append, an edit or a delete of a message."""
    conn.execute(
        "UPDATE documents SET content_hash = %s, items = %s, item_count = %s, title = %s, "
        "updated_at = now() WHERE id = %s",
        (content_hash(items, title), Jsonb(items), len(items), title, document_pk),
    )


def items_of(conn: Connection[Any], document_pk: UUID) -> list[dict[str, Any]]:
    row = conn.execute("SELECT items FROM documents WHERE id = %s", (document_pk,)).fetchone()
    return list(row["items"]) if row else []


def append_items(
    conn: Connection[Any], document_pk: UUID, items: list[dict[str, Any]], title: str | None
) -> None:
    """Items added at the end of a document (an append in order), without reading it."""
    conn.execute(
        "UPDATE documents SET items = items || %s, item_count = item_count + %s, "
        "content_hash = %s, title = %s, updated_at = now() WHERE id = %s",
        (Jsonb(items), len(items), UNHASHED, title, document_pk),
    )


@dataclass(frozen=True)
class Conversation:
    """A document an append writes to, locked FOR UPDATE until the append commits."""

    pk: UUID
    title: str | None
    current_operation_id: UUID | None
    created: bool
    last_operation_id: UUID | None = None  # the latest operation that stored its messages
    trashed: bool = False  # in the trash (the caller refuses the append)


def open_conversation(
    conn: Connection[Any], agent_key: str, document_id: str, title: str | None
) -> Conversation:
    """The conversation's document, locked (appends to one conversation queue here, so
    concurrent ones lose nothing), created empty on first use."""
    row = conn.execute(
        "SELECT id, title, current_operation_id, last_operation_id, trashed_at FROM documents "
        "WHERE agent_id = %s AND document_id = %s FOR UPDATE",
        (agent_key, document_id),
    ).fetchone()
    if row is not None:
        return Conversation(
            row["id"], row["title"], row["current_operation_id"], False, row["last_operation_id"],
            trashed=row["trashed_at"] is not None,
        )  # fmt: skip
    inserted = conn.execute(
        """
        INSERT INTO documents (agent_id, document_id, content_hash, items, item_count, title)
        VALUES (%s, %s, %s, '[]'::jsonb, 0, %s)
        ON CONFLICT (agent_id, document_id) DO NOTHING RETURNING id
        """,
        (agent_key, document_id, content_hash([], title), title),
    ).fetchone()
    if inserted is None:  # a concurrent append created it first: wait for its lock
        return open_conversation(conn, agent_key, document_id, title)
    return Conversation(inserted["id"], title, None, created=True)


def set_current_operation(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> None:
    """The post that processes the document's content (and that appends build on)."""
    conn.execute(
        "UPDATE documents SET current_operation_id = %s, last_operation_id = %s WHERE id = %s",
        (operation_id, operation_id, document_pk),
    )


def set_last_operation(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> None:
    """The latest operation that stored content in the document (an append)."""
    conn.execute(
        "UPDATE documents SET last_operation_id = %s WHERE id = %s", (operation_id, document_pk)
    )


def get_document(conn: Connection[Any], document_pk: UUID) -> dict[str, Any] | None:
    """The document row without its items (the pipeline reads the messages it works on)."""
    return get_documents(conn, [document_pk]).get(document_pk)


def get_documents(conn: Connection[Any], document_pks: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """`get_document` of several, by pk (those that exist)."""
    rows = conn.execute(
        "SELECT id, agent_id, document_id, item_count, current_operation_id, created_at, title "
        "FROM documents WHERE id = ANY(%s)",
        (document_pks,),
    ).fetchall()
    return {r["id"]: r for r in rows}


def item_extras(
    conn: Connection[Any], document_pk: UUID, message_ids: list[str]
) -> dict[str, dict[str, Any]]:
    """The raw items of these messages (by message id: an item's own, else its position), for
    what a message row does not hold (context, metadata); picked out by the database, so a
    stage reads what it needs of a long conversation only."""
    return {
        r["message_id"]: r["item"]
        for r in conn.execute(
            """
            SELECT coalesce(t.item->>'message_id', (t.n - 1)::text) AS message_id, t.item
            FROM documents d, jsonb_array_elements(d.items) WITH ORDINALITY AS t(item, n)
            WHERE d.id = %s AND coalesce(t.item->>'message_id', (t.n - 1)::text) = ANY(%s)
            """,
            (document_pk, message_ids),
        )
    }


def owners(conn: Connection[Any], document_pks: list[UUID]) -> list[dict[str, Any]]:
    """The documents that still exist among these pks (id, agent_id, document_id)."""
    if not document_pks:
        return []
    return conn.execute(
        "SELECT id, agent_id, document_id FROM documents WHERE id = ANY(%s) ORDER BY id",
        (list(set(document_pks)),),
    ).fetchall()


# A document as the listing shows it (and, with its items, `find_document`).
_SUMMARY = """d.item_count, d.created_at, d.updated_at, d.trashed_at,
       coalesce(d.last_operation_id, d.current_operation_id) AS operation_id, o.status,
       (SELECT count(*) FROM memory_units u WHERE u.document_pk = d.id) AS unit_count
FROM documents d
LEFT JOIN operations o ON o.id = coalesce(d.last_operation_id, d.current_operation_id)"""


def find_document(
    conn: Connection[Any], scope: Scope, agent_id: str, document_id: str
) -> dict[str, Any] | None:
    """The document with its raw items, as they were posted."""
    return conn.execute(
        f"""
        SELECT d.document_id, d.items, {_SUMMARY}
        WHERE d.agent_id = %s AND d.document_id = %s
        """,
        (scope.key(agent_id), document_id),
    ).fetchone()


def list_documents(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    *,
    limit: int = 100,
    offset: int = 0,
    trashed: bool = False,
) -> list[dict[str, Any]]:
    """The agent's live documents, newest first; `trashed`: those in the trash instead."""
    return conn.execute(
        f"""
        SELECT d.document_id, {_SUMMARY}
        WHERE d.agent_id = %s AND (d.trashed_at IS NOT NULL) = %s
        ORDER BY d.created_at DESC, d.document_id LIMIT %s OFFSET %s
        """,
        (scope.key(agent_id), trashed, limit, offset),
    ).fetchall()


def delete_document(
    conn: Connection[Any], scope: Scope, agent_id: str, document_id: str
) -> dict[str, int] | None:
    """`delete_stored` of the client's agent's document."""
    return delete_stored(conn, scope.key(agent_id), document_id)


def delete_stored(conn: Connection[Any], key: str, document_id: str) -> dict[str, int] | None:
    """Hard delete of a document (in the trash or not): its raw content, its operations, its
    units with their links, entity references and access counts, and entities no remaining
    memory mentions. None when there is no such document. Order: see memora.store.purge. The
    document is locked FOR NO KEY UPDATE: that stops re-posts of it (FOR UPDATE) but not a
    stage inserting its units (whose foreign key takes KEY SHARE while it holds its
    operation's lock, which we wait for).
    """
    doc = conn.execute(
        "SELECT id FROM documents WHERE agent_id = %s AND document_id = %s FOR NO KEY UPDATE",
        (key, document_id),
    ).fetchone()
    if doc is None:
        return None
    params = {"d": doc["id"]}
    operations = conn.execute("DELETE FROM operations WHERE document_pk = %(d)s", params).rowcount
    counts = purge_units(conn, "SELECT id FROM memory_units WHERE document_pk = %(d)s", params)
    for table in ("conversation_chunks", "conversation_messages"):
        counts[table] = conn.execute(
            f"DELETE FROM {table} WHERE document_pk = %(d)s", params
        ).rowcount
    conn.execute("DELETE FROM documents WHERE id = %(d)s", params)
    orphans = entities.delete_orphans(conn, key)
    left = remaining(conn, [doc["id"]], "document_pk")
    return {
        "units_deleted": counts["memory_units"],
        "entities_deleted": orphans,
        "links_deleted": counts["memory_links"],
        "operations_deleted": operations,
        "messages_deleted": counts["conversation_messages"],
        "chunks_deleted": counts["conversation_chunks"],
        "remaining": left.total,  # the receipt: every table with a document_pk, checked
    }
