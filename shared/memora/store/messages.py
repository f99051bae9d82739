"""conversation_messages and unit_sources: a document's messages, and which messages each
memory unit came from.

The messages are derived from the document's items when it is stored (`sync_document`) and
changed one at a time by the sync routes (edit, delete). Pipeline functions take stored agent
keys and pks; `find_message` serves requests and takes the caller's Scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.tenancy import Scope
from memora.nlp.chunking import content_hash
from memora.store.purge import purge_units

_COLUMNS = (
    "id, message_id, position, role, speaker, occurred_at, text, content_hash, remember, "
    "searchable, channel"
)


@dataclass(frozen=True)
class MessageRow:
    message_id: str
    position: int
    role: str | None
    speaker: str | None
    occurred_at: datetime | None  # None: the document's time
    text: str
    remember: bool = True  # False: nothing extracted from it (a temporary chat)
    searchable: bool = True  # False: kept out of the conversation index
    channel: str | None = None  # where it was said (`web`, `teams`...)

    @property
    def hash(self) -> str:
        return content_hash(self.text)

    @classmethod
    def from_item(cls, message_id: str, position: int, item: dict[str, Any]) -> MessageRow:
        when = item.get("event_date")
        remember = item.get("remember") is not False
        return cls(
            message_id,
            position,
            item.get("role"),
            item.get("speaker"),
            datetime.fromisoformat(when) if when else None,
            item["content"],
            remember,
            bool(item.get("searchable", remember)),
            item.get("channel"),
        )


@dataclass(frozen=True)
class Synced:
    changed: list[UUID]  # messages whose text, role or place changed
    removed: list[UUID]  # messages the new items no longer hold (to delete after their chunks)
    inserted: int


def _state(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["content_hash"], row["position"], row["role"], row["speaker"], row["occurred_at"],
        row["remember"], row["searchable"], row["channel"],
    )  # fmt: skip


@dataclass(frozen=True)
class NewMessage:
    """A message an append adds: `position` in conversation order, `ordinal` in arrival."""

    row: MessageRow
    ordinal: int
    occurred_at: datetime


def sync_document(
    conn: Connection[Any], agent_key: str, document_pk: UUID, rows: Sequence[MessageRow]
) -> Synced:
    """Make the document's messages those of `rows`: insert new ones, update changed ones (in
    place, so their units' sources stay) and say which are gone; the caller invalidates the
    chunks of changed and removed messages, then calls `delete` for the removed ones."""
    created = conn.execute(
        "SELECT created_at FROM documents WHERE id = %s", (document_pk,)
    ).fetchone()
    assert created is not None
    default_time: datetime = created["created_at"]
    existing = {
        r["message_id"]: r
        for r in conn.execute(
            f"SELECT {_COLUMNS} FROM conversation_messages WHERE document_pk = %s FOR UPDATE",
            (document_pk,),
        )
    }
    wanted = {r.message_id for r in rows}
    removed = [r["id"] for mid, r in existing.items() if mid not in wanted]
    changed: list[UUID] = []
    updates: list[tuple[Any, ...]] = []
    inserts: list[tuple[Any, ...]] = []
    for r in rows:
        when = r.occurred_at or default_time
        old = existing.get(r.message_id)
        if old is None:
            inserts.append(
                (agent_key, document_pk, r.message_id, r.position, r.role, r.speaker, when,
                 r.text, r.hash, r.position, None, r.remember, r.searchable, r.channel)
            )  # fmt: skip
        elif _state(old) != (
            r.hash, r.position, r.role, r.speaker, when, r.remember, r.searchable, r.channel
        ):  # fmt: skip
            changed.append(old["id"])
            updates.append(
                (r.position, r.role, r.speaker, when, r.text, r.hash, r.remember, r.searchable,
                 r.channel, old["id"])
            )  # fmt: skip
    if updates:
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE conversation_messages SET position = %s, role = %s, speaker = %s, "
                "occurred_at = %s, text = %s, content_hash = %s, remember = %s, "
                "searchable = %s, channel = %s, updated_at = now() WHERE id = %s",
                updates,
            )
    _insert(conn, inserts)
    return Synced(changed, removed, len(inserts))


def _insert(conn: Connection[Any], rows: Sequence[tuple[Any, ...]]) -> None:
    """(agent, document pk, message id, position, role, speaker, occurred_at, text, hash,
    ordinal, claim, remember, searchable, channel) rows. One INSERT over arrays, not COPY: this runs
    in the request's tenant session, and PostgreSQL refuses COPY FROM on a table under
    row-level security."""
    if not rows:
        return
    conn.execute(
        "INSERT INTO conversation_messages (agent_id, document_pk, message_id, position, "
        "role, speaker, occurred_at, text, content_hash, ordinal, extracted_by, remember, "
        "searchable, channel) "
        "SELECT * FROM unnest(%s::text[], %s::uuid[], %s::text[], %s::int[], %s::text[], "
        "%s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::int[], %s::uuid[], "
        "%s::boolean[], %s::boolean[], %s::text[])",
        [list(c) for c in zip(*rows, strict=True)],
    )


def claim_all(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> None:
    """Every message of the document is extracted by this operation (a whole post, whose
    units are all made anew: their ordinals become the items' order again)."""
    conn.execute(
        "UPDATE conversation_messages SET extracted_by = %s, ordinal = position "
        "WHERE document_pk = %s",
        (operation_id, document_pk),
    )


def claim(conn: Connection[Any], message_pk: UUID, operation_id: UUID) -> None:
    conn.execute(
        "UPDATE conversation_messages SET extracted_by = %s WHERE id = %s",
        (operation_id, message_pk),
    )


# ------------------------------------------------------------------------------ appends
def by_message_ids(
    conn: Connection[Any], document_pk: UUID, message_ids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The document's messages with these ids (locked: the document is too)."""
    return {
        r["message_id"]: r
        for r in conn.execute(
            f"SELECT {_COLUMNS}, extracted_by FROM conversation_messages "
            "WHERE document_pk = %s AND message_id = ANY(%s)",
            (document_pk, list(message_ids)),
        )
    }


@dataclass(frozen=True)
class Tail:
    last_position: int  # -1 when empty
    last_ordinal: int
    newest: datetime | None  # the latest occurred_at


def tail(conn: Connection[Any], document_pk: UUID) -> Tail:
    row = conn.execute(
        "SELECT coalesce(max(position), -1) AS p, coalesce(max(ordinal), -1) AS o, "
        "max(occurred_at) AS t FROM conversation_messages WHERE document_pk = %s",
        (document_pk,),
    ).fetchone()
    assert row is not None
    return Tail(row["p"], row["o"], row["t"])


def timeline(conn: Connection[Any], document_pk: UUID) -> list[dict[str, Any]]:
    """(id, message_id, position, occurred_at) of every message in conversation order (what
    places a late arrival)."""
    return conn.execute(
        "SELECT id, message_id, position, occurred_at FROM conversation_messages "
        "WHERE document_pk = %s "
        "ORDER BY position",
        (document_pk,),
    ).fetchall()


def renumber(conn: Connection[Any], positions: Sequence[tuple[UUID, int]]) -> None:
    """New conversation positions for existing messages (a late arrival moved them)."""
    if positions:
        ids, places = zip(*positions, strict=True)
        conn.execute(
            "UPDATE conversation_messages m SET position = p.position FROM "
            "unnest(%s::uuid[], %s::int[]) AS p(id, position) WHERE m.id = p.id",
            (list(ids), list(places)),
        )


def append(
    conn: Connection[Any],
    agent_key: str,
    document_pk: UUID,
    new: Sequence[NewMessage],
    operation_id: UUID,
) -> None:
    _insert(
        conn,
        [
            (agent_key, document_pk, m.row.message_id, m.row.position, m.row.role, m.row.speaker,
             m.occurred_at, m.row.text, m.row.hash, m.ordinal, operation_id, m.row.remember,
             m.row.searchable, m.row.channel)
            for m in new
        ],
    )  # fmt: skip


# ------------------------------------------------------------------------------ extraction
def claimed(conn: Connection[Any], document_pk: UUID, operation_id: UUID) -> list[dict[str, Any]]:
    """The messages this operation extracts, in conversation order."""
    return conn.execute(
        f"SELECT {_COLUMNS}, ordinal FROM conversation_messages "
        "WHERE document_pk = %s AND extracted_by = %s ORDER BY position",
        (document_pk, operation_id),
    ).fetchall()


def claimed_by(conn: Connection[Any], claims: Sequence[tuple[UUID, UUID]]) -> list[dict[str, Any]]:
    """The messages to remember that these operations extract, each of its document
    ((document, operation) pairs), in one statement."""
    return conn.execute(
        "SELECT m.text, m.speaker, m.occurred_at FROM conversation_messages m "
        "JOIN unnest(%s::uuid[], %s::uuid[]) AS c(document_pk, operation_id) "
        "ON m.document_pk = c.document_pk AND m.extracted_by = c.operation_id WHERE m.remember",
        ([d for d, _ in claims], [o for _, o in claims]),
    ).fetchall()


def still_claimed(
    conn: Connection[Any], message_pks: Sequence[UUID], operation_id: UUID
) -> dict[UUID, int]:
    """Of these messages, those still claimed by the operation, with their ordinal; locked
    FOR SHARE until the write commits, so a re-post cannot claim them in between."""
    return {
        r["id"]: r["ordinal"]
        for r in conn.execute(
            "SELECT id, ordinal FROM conversation_messages WHERE id = ANY(%s) "
            "AND extracted_by = %s FOR SHARE",
            (list(message_pks), operation_id),
        )
    }


def preceding(
    conn: Connection[Any], document_pk: UUID, position: int, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` messages before `position`, in conversation order (an extractor's
    context)."""
    if limit <= 0:
        return []
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM conversation_messages WHERE document_pk = %s AND position < %s "
        "ORDER BY position DESC LIMIT %s",
        (document_pk, position, limit),
    ).fetchall()
    return rows[::-1]


def find_message(
    conn: Connection[Any], scope: Scope, agent_id: str, document_id: str, message_id: str
) -> dict[str, Any] | None:
    """The message (locked, with its document's pk, items, title and when it went to the
    trash) for an edit or delete."""
    return conn.execute(
        f"""
        SELECT m.{_COLUMNS.replace(", ", ", m.")}, d.id AS document_pk, d.items, d.title,
               d.trashed_at
        FROM documents d JOIN conversation_messages m ON m.document_pk = d.id
        WHERE d.agent_id = %s AND d.document_id = %s AND m.message_id = %s
        FOR NO KEY UPDATE OF d FOR UPDATE OF m
        """,
        (scope.key(agent_id), document_id, message_id),
    ).fetchone()


def update_text(
    conn: Connection[Any], message_pk: UUID, text: str, role: str | None, speaker: str | None,
    occurred_at: datetime,
) -> None:  # fmt: skip
    conn.execute(
        "UPDATE conversation_messages SET text = %s, content_hash = %s, role = %s, speaker = %s, "
        "occurred_at = %s, updated_at = now() WHERE id = %s",
        (text, content_hash(text), role, speaker, occurred_at, message_pk),
    )


def delete(conn: Connection[Any], message_pks: Sequence[UUID]) -> int:
    """Delete messages (their chunks and unit sources go with them by foreign key)."""
    if not message_pks:
        return 0
    cur = conn.execute("DELETE FROM conversation_messages WHERE id = ANY(%s)", (list(message_pks),))
    return max(cur.rowcount, 0)


def following(conn: Connection[Any], message_pk: UUID) -> list[UUID]:
    """The message after this one in its conversation (none for the last): its chunk quotes
    this one's text as its preceding context."""
    row = conn.execute(
        """
        SELECT n.id FROM conversation_messages m
        JOIN conversation_messages n ON n.document_pk = m.document_pk AND n.position > m.position
        WHERE m.id = %s ORDER BY n.position LIMIT 1
        """,
        (message_pk,),
    ).fetchone()
    return [row["id"]] if row else []


def get(conn: Connection[Any], message_pk: UUID) -> dict[str, Any] | None:
    return conn.execute(
        f"SELECT {_COLUMNS}, document_pk FROM conversation_messages WHERE id = %s", (message_pk,)
    ).fetchone()


# ------------------------------------------------------------------------------ unit sources
def add_sources(conn: Connection[Any], pairs: Sequence[tuple[UUID, UUID]]) -> int:
    """(unit id, message pk) pairs."""
    if not pairs:
        return 0
    with conn.cursor() as cur, cur.copy("COPY unit_sources (unit_id, message_pk) FROM STDIN") as cp:
        for pair in pairs:
            cp.write_row(pair)
    return len(pairs)


_ONLY_FROM = (
    "SELECT s.unit_id FROM unit_sources s WHERE s.message_pk = %(m)s AND NOT EXISTS "
    "(SELECT 1 FROM unit_sources o WHERE o.unit_id = s.unit_id AND o.message_pk <> %(m)s)"
)


def detach(conn: Connection[Any], message_pk: UUID) -> dict[str, int]:
    """Before a message is deleted: the units it alone was the source of are deleted, and the
    others lose it from their sources."""
    counts = purge_units(conn, _ONLY_FROM, {"m": message_pk})
    counts["unit_sources"] = conn.execute(
        "DELETE FROM unit_sources WHERE message_pk = %s", (message_pk,)
    ).rowcount
    return counts


# ------------------------------------------------------------------------------ consistency
def orphaned_units(
    conn: Connection[Any], agent_key: str | None, limit: int
) -> list[dict[str, Any]]:
    """Units of a document none of whose sources is a message that exists (id, document_pk)."""
    agent = " AND u.agent_id = %(a)s" if agent_key is not None else ""
    return conn.execute(
        f"""
        SELECT u.id, u.document_pk FROM memory_units u
        WHERE u.document_pk IS NOT NULL{agent}
          AND NOT EXISTS (SELECT 1 FROM unit_sources s JOIN conversation_messages m
                          ON m.id = s.message_pk WHERE s.unit_id = u.id)
        LIMIT %(n)s
        """,
        {"a": agent_key, "n": limit},
    ).fetchall()


def delete_dangling_sources(conn: Connection[Any], unit_ids: Sequence[UUID]) -> int:
    """Source rows of these units that name a message that is gone."""
    cur = conn.execute(
        "DELETE FROM unit_sources s WHERE s.unit_id = ANY(%s) AND NOT EXISTS "
        "(SELECT 1 FROM conversation_messages m WHERE m.id = s.message_pk)",
        (list(unit_ids),),
    )
    return max(cur.rowcount, 0)


def purge_units_by_id(conn: Connection[Any], unit_ids: Sequence[UUID]) -> dict[str, int]:
    return purge_units(conn, "SELECT unnest(%(u)s::uuid[])", {"u": list(unit_ids)})
