"""Keeping everything derived from a message in step with it: the request side.

A message is the source of truth. Storing a document syncs its messages (new, changed,
gone) and drops the chunks of those that changed. Editing one message updates it in the
document and in its row, drops the chunks that cover it and creates a `message_edit`
operation that re-extracts that message alone and re-indexes those chunks' messages.
Deleting one message removes it from the document, deletes the units it was the only
source of, takes it out of the other units' sources and drops its chunks, at once, in the
request's transaction; the neighbours its combined chunks also covered are re-indexed by a
`message_delete` operation. Work is proportional to the message, not to its conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.models import Role
from memora.basics.stages import OperationKind, first_stage
from memora.basics.tenancy import Scope
from memora.conversations.append import in_the_trash
from memora.store import chunks, documents, entities, messages, operations, purge
from memora.store.messages import MessageRow


def effective_id(item: dict[str, Any], position: int) -> str:
    return str(item.get("message_id") or position)


def store_messages(
    conn: Connection[Any],
    agent_key: str,
    document_pk: UUID,
    items: list[dict[str, Any]],
    operation_id: UUID,
    *,
    retitled: bool = False,
) -> messages.Synced:
    """Sync the document's messages with its items (in the request's transaction); the
    operation that processes the post claims all of them."""
    rows = [MessageRow.from_item(effective_id(it, i), i, it) for i, it in enumerate(items)]
    synced = messages.sync_document(conn, agent_key, document_pk, rows)
    messages.claim_all(conn, document_pk, operation_id)
    if retitled:  # the title is in every chunk
        chunks.delete_for_document(conn, document_pk)
    else:
        chunks.delete_covering(conn, synced.changed + synced.removed)
    messages.delete(conn, synced.removed)
    return synced


@dataclass(frozen=True)
class MessagePatch:
    content: str | None = None
    role: Role | None = None
    speaker: str | None = None
    event_date: datetime | None = None


@dataclass
class SyncResult:
    agent_id: str
    document_id: str
    message_id: str
    operation_id: UUID | None = None
    counts: dict[str, int] = field(default_factory=dict)


class MessageNotFound(LookupError):
    pass


def _locate(items: list[dict[str, Any]], message_id: str) -> int:
    for position, item in enumerate(items):
        if effective_id(item, position) == message_id:
            return position
    raise MessageNotFound(message_id)


def edit_message(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    document_id: str,
    message_id: str,
    patch: MessagePatch,
) -> SyncResult:
    """Apply the edit and create its operation (committed by the caller's transaction); the
    caller enqueues its first stage, unless nothing changed (operation_id None)."""
    found = messages.find_message(conn, scope, agent_id, document_id, message_id)
    if found is None:
        raise MessageNotFound(message_id)
    if found["trashed_at"] is not None:
        raise in_the_trash(document_id)
    items: list[dict[str, Any]] = found["items"]
    position = _locate(items, message_id)
    item = dict(items[position])
    updates = {
        "content": patch.content,
        "role": patch.role,
        "speaker": patch.speaker,
        "event_date": patch.event_date.isoformat() if patch.event_date else None,
    }
    item.update({k: v for k, v in updates.items() if v is not None})
    result = SyncResult(agent_id, document_id, message_id)
    if item == items[position]:
        return result
    items[position] = item
    documents.replace_items(conn, found["document_pk"], items, found["title"])
    messages.update_text(
        conn,
        found["id"],
        item["content"],
        item.get("role"),
        item.get("speaker"),
        patch.event_date or found["occurred_at"],
    )
    # The next message's chunk quotes this one as its context: it is rebuilt too.
    stale = [found["id"], *messages.following(conn, found["id"])]
    dropped, neighbours = chunks.delete_covering(conn, stale)
    result.counts = {"messages_updated": 1, "chunks_dropped": dropped}
    result.operation_id = operations.create_operation(
        conn,
        scope,
        agent_id,
        kind=OperationKind.MESSAGE_EDIT,
        first_stage=first_stage(OperationKind.MESSAGE_EDIT),
        document_pk=found["document_pk"],
        document_id=document_id,
        payload={
            "priority": "live",
            "message_id": message_id,
            "message_pk": str(found["id"]),
            "message_pks": [str(pk) for pk in {*stale, *neighbours}],
        },
        counts={"items": 1},
    )
    messages.claim(conn, found["id"], result.operation_id)
    return result


def delete_message(
    conn: Connection[Any], scope: Scope, agent_id: str, document_id: str, message_id: str
) -> SyncResult:
    """Delete the message and everything that came from it alone, now; a `message_delete`
    operation re-indexes neighbours that shared a chunk with it (operation_id None when
    there are none)."""
    found = messages.find_message(conn, scope, agent_id, document_id, message_id)
    if found is None:
        raise MessageNotFound(message_id)
    items: list[dict[str, Any]] = found["items"]
    position = _locate(items, message_id)
    # Items without an id are known by their position: pin it before positions shift.
    kept = [
        {**it, "message_id": effective_id(it, i)} if "message_id" not in it else it
        for i, it in enumerate(items)
        if i != position
    ]
    documents.replace_items(conn, found["document_pk"], kept, found["title"])
    # The next message's chunk quoted this one as its context: it is rebuilt with the one before.
    dropped, neighbours = chunks.delete_covering(conn, [found["id"]])
    for pk in messages.following(conn, found["id"]):
        quoted, others = chunks.delete_covering(conn, [pk])
        if quoted:  # only an indexed message needs indexing again (none without the index)
            dropped, neighbours = dropped + quoted, neighbours | others | {pk}
    counts = messages.detach(conn, found["id"])
    if counts["memory_units"]:
        counts["entities"] = entities.delete_orphans(conn, scope.key(agent_id))
    messages.delete(conn, [found["id"]])
    result = SyncResult(agent_id, document_id, message_id)
    result.counts = {
        "messages_deleted": 1,
        "chunks_deleted": dropped,
        "units_deleted": counts["memory_units"],
        "unit_sources_removed": counts["unit_sources"],
        "links_deleted": counts["memory_links"],
        "entities_deleted": counts.get("entities", 0),
        # the receipt: what a check of every place that held the message still finds (0)
        "remaining": purge.message_remaining(conn, found["id"], found["document_pk"], message_id),
    }
    if neighbours:
        result.operation_id = operations.create_operation(
            conn,
            scope,
            agent_id,
            kind=OperationKind.MESSAGE_DELETE,
            first_stage=first_stage(OperationKind.MESSAGE_DELETE),
            document_pk=found["document_pk"],
            document_id=document_id,
            payload={"priority": "live", "message_pks": [str(pk) for pk in neighbours]},
        )
    return result
