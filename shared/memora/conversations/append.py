"""Appending messages to a live conversation (issue 24): the request side.

A conversation is a document. An append locks it (appends to one conversation queue there,
so concurrent ones from several replicas lose nothing), skips the messages it already holds
(the same id and content: a retry), refuses a known id with other content, places the new
ones by event date, then arrival (a message without a date is dated on arrival), and hands
them to an `append` operation that claims them: its stages extract, embed, resolve, link and
index those messages only. That operation is a new one, or (coalescing) the conversation's
latest append when its extract has not started: one operation then carries every message
that arrived meanwhile. In order, a new message goes last; one that arrives late is placed where
its date puts it, and the neighbours whose chunks it changes are re-indexed. When the last
chunk combines short messages and has room, it is dropped so the new messages join it, as if
the conversation had been posted whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Conflict
from memora.basics.models import utcnow
from memora.nlp.chunking import ChunkingConfig
from memora.store import chunks, documents, messages
from memora.store.messages import MessageRow, NewMessage

Outcome = Literal["created", "appended", "unchanged"]


@dataclass(frozen=True)
class Appended:
    document_pk: UUID
    operation_id: UUID  # the operation that takes the messages; for a retry, the one that took
    outcome: Outcome
    new: int
    existing: int
    joined: bool = False  # the messages joined a pending operation (already handed off)


@dataclass(frozen=True)
class Placed:
    items: list[dict[str, Any]]  # in order: the new items; late: all, in conversation order
    new: list[NewMessage]
    moved: list[tuple[UUID, int]]  # existing messages a late arrival moved: (pk, new position)
    neighbours: list[UUID]  # existing messages next to a late arrival (their chunks change)


def _when(item: dict[str, Any], now: datetime) -> datetime:
    return datetime.fromisoformat(item["event_date"]) if item.get("event_date") else now


def _same(stored: dict[str, Any], item: dict[str, Any]) -> bool:
    """A re-sent message: same text, role and speaker (and date, when the client gives one)."""
    return (
        stored["text"] == item["content"]
        and stored["role"] == item.get("role")
        and stored["speaker"] == item.get("speaker")
        and (not item.get("event_date") or stored["occurred_at"] == _when(item, utcnow()))
    )


def append_messages(
    conn: Connection[Any],
    agent_key: str,
    document_id: str,
    items: list[dict[str, Any]],
    title: str | None,
    take: Callable[[documents.Conversation, int], tuple[UUID, bool]],
    chunking: ChunkingConfig | None,
) -> Appended:
    """Append `items` (each with a message_id) in the caller's transaction.
    `take(conversation, new messages)` gives the operation that takes them and whether it is
    a pending one they joined (else it was made for them); `chunking` is None when the
    conversation index is off."""
    doc = documents.open_conversation(conn, agent_key, document_id, title)
    if doc.trashed:
        raise in_the_trash(document_id)
    stored = messages.by_message_ids(conn, doc.pk, [it["message_id"] for it in items])
    conflicts = [
        it["message_id"] for it in items
        if it["message_id"] in stored and not _same(stored[it["message_id"]], it)
    ]  # fmt: skip
    if conflicts:
        raise Conflict(
            "message_conflict",
            f"message {conflicts[0]!r} is already in the conversation with other content; "
            "edit it with PATCH .../messages/{message_id}",
            {"message_ids": conflicts},
        )
    fresh = [it for it in items if it["message_id"] not in stored]
    retitled = title is not None and title != doc.title and not doc.created
    if not fresh and not retitled:
        claims = [r["extracted_by"] for r in stored.values() if r["extracted_by"]]
        known = claims[-1] if claims else doc.current_operation_id
        assert known is not None  # a conversation with messages has had an operation
        return Appended(doc.pk, known, "unchanged", 0, len(stored))

    operation_id, joined = take(doc, len(fresh))
    if doc.current_operation_id is None:
        documents.set_current_operation(conn, doc.pk, operation_id)
    elif not joined:  # a joined operation is the document's last already
        documents.set_last_operation(conn, doc.pk, operation_id)
    placed = _place(conn, doc, fresh)
    messages.renumber(conn, placed.moved)
    messages.append(conn, agent_key, doc.pk, placed.new, operation_id)
    if placed.moved or placed.neighbours:  # late: the items in their new order
        documents.replace_items(conn, doc.pk, placed.items, title or doc.title)
    else:
        documents.append_items(conn, doc.pk, placed.items, title or doc.title)
    if chunking is not None:
        _drop_stale_chunks(conn, doc.pk, placed, chunking, retitled=retitled)
    outcome: Outcome = "created" if doc.created else "appended"
    return Appended(doc.pk, operation_id, outcome, len(fresh), len(stored), joined)


def in_the_trash(document_id: str) -> Conflict:
    """A write to a document in the trash: refused until it is restored."""
    return Conflict(
        "document_trashed",
        f"document {document_id!r} is in the trash: restore it (POST .../documents/"
        f"{document_id}/restore) before writing to it, or delete it",
        {"document_id": document_id},
    )


def _place(
    conn: Connection[Any], doc: documents.Conversation, fresh: list[dict[str, Any]]
) -> Placed:
    now = utcnow()
    dated = [it if it.get("event_date") else {**it, "event_date": now.isoformat()} for it in fresh]
    dated.sort(key=lambda it: datetime.fromisoformat(it["event_date"]))  # stable: arrival
    tail = messages.tail(conn, doc.pk)
    first = datetime.fromisoformat(dated[0]["event_date"])
    if tail.newest is None or first >= tail.newest:  # in order: after the last message
        new = [
            NewMessage(
                MessageRow.from_item(it["message_id"], tail.last_position + 1 + i, it),
                tail.last_ordinal + 1 + i,
                datetime.fromisoformat(it["event_date"]),
            )
            for i, it in enumerate(dated)
        ]
        return Placed(dated, new, [], [])
    return _place_late(conn, doc, dated, tail)


def _place_late(
    conn: Connection[Any],
    doc: documents.Conversation,
    dated: list[dict[str, Any]],
    tail: messages.Tail,
) -> Placed:
    """Merge the new messages into the conversation by date; every message is renumbered in
    the merged order (items without a message_id get theirs pinned first)."""
    existing = messages.timeline(conn, doc.pk)
    items = {
        str(it.get("message_id") or i): it for i, it in enumerate(documents.items_of(conn, doc.pk))
    }
    # (item, its stored row or None for a new one, its date), in conversation order
    merged: list[tuple[dict[str, Any], dict[str, Any] | None, datetime]] = [
        ({**items[r["message_id"]], "message_id": r["message_id"]}, r, r["occurred_at"])
        for r in existing
    ]
    for it in dated:
        when = datetime.fromisoformat(it["event_date"])
        at = max((k + 1 for k, entry in enumerate(merged) if entry[2] <= when), default=0)
        merged.insert(at, (it, None, when))
    new: list[NewMessage] = []
    moved: list[tuple[UUID, int]] = []
    neighbours: set[UUID] = set()
    for position, (it, row, when) in enumerate(merged):
        if row is not None:
            if row["position"] != position:
                moved.append((row["id"], position))
            continue
        ordinal = tail.last_ordinal + 1 + len(new)
        new.append(NewMessage(MessageRow.from_item(it["message_id"], position, it), ordinal, when))
        for k in (position - 1, position + 1):
            if 0 <= k < len(merged) and (near := merged[k][1]) is not None:
                neighbours.add(near["id"])
    return Placed([it for it, _, _ in merged], new, moved, sorted(neighbours))


def _drop_stale_chunks(
    conn: Connection[Any],
    document_pk: UUID,
    placed: Placed,
    cfg: ChunkingConfig,
    *,
    retitled: bool,
) -> None:
    """Chunks the new messages change: all of them for a new title (it is in every chunk);
    a late arrival's neighbours'; the last chunk when the first new message joins it."""
    if retitled:
        chunks.delete_for_document(conn, document_pk)
        return
    if placed.neighbours:
        chunks.delete_covering(conn, placed.neighbours)
    if not placed.new:
        return
    first = placed.new[0].row
    if cfg.combine_short and len(first.text) < cfg.short_chars and cfg.indexes(first.role):
        before = chunks.open_group(
            conn, document_pk, first.position, cfg.roles, cfg.short_chars, cfg.max_combined
        )
        if before is not None:
            chunks.delete_covering(conn, [before])
