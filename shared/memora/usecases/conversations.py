"""Conversations (seed 002 §7): edit or delete one message, search the raw messages, the
conversation index's status and rebuild, the consistency check and its repair.

Each writing use case commits, then hands the operation it started to the pipeline: an edit
re-extracts what came from that message alone, a delete re-indexes the neighbours whose
chunks it invalidated, a reindex rebuilds the agent's index, a repair embeds and indexes what
is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
from psycopg import Connection

from memora.basics.errors import Conflict, Invalid, NotFound
from memora.basics.stages import OperationKind, first_stage
from memora.basics.tenancy import Scope
from memora.conversations import consistency, index, sync
from memora.conversations.consistency import Report
from memora.conversations.sync import MessagePatch as MessagePatch
from memora.conversations.sync import SyncResult as SyncResult
from memora.pipeline.context import AppContext
from memora.pipeline.handoff import TaskBackend, hand_off
from memora.retrieval.conversation import ConversationHit, ConversationQuery, search_with_settings
from memora.store import generations


def index_disabled() -> Conflict:
    """Conversation search and its index on a deployment that turned the index off."""
    return Conflict(
        "conversation_index_disabled",
        "conversation search is turned off on this deployment (MEMORA_CONVERSATION_INDEX=false)",
    )


def edit_message(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    document_id: str,
    message_id: str,
    patch: MessagePatch,
) -> SyncResult:
    """Edit one message (operation kind `message_edit` when something must be redone)."""
    settings = app.settings
    if patch.content is not None and len(patch.content) > settings.max_content_chars:
        limit = settings.max_content_chars
        raise Invalid("content_too_long", f"content is limited to {limit} characters")
    with _message(document_id, message_id), conn.transaction():
        result = sync.edit_message(conn, scope, agent_id, document_id, message_id, patch)
    _hand_off(app.backend, OperationKind.MESSAGE_EDIT, result.operation_id)
    return result


def delete_message(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    document_id: str,
    message_id: str,
) -> SyncResult:
    """Delete one message now: its chunks, the units it was the only source of, and its place
    among other units' sources; neighbours that shared a chunk with it are re-indexed."""
    with _message(document_id, message_id), conn.transaction():
        result = sync.delete_message(conn, scope, agent_id, document_id, message_id)
    _hand_off(app.backend, OperationKind.MESSAGE_DELETE, result.operation_id)
    return result


def search(app: AppContext, scope: Scope, query: ConversationQuery) -> list[ConversationHit]:
    """Messages of the agent's conversations that match the query, one hit per message (with
    the context's embedder: the query service's). The embedding generation of the query's
    vector is checked live after the search (memora.pipeline.generation): a search that a
    `memora reembed` switch overtook runs again with the new model, once."""
    if not app.settings.conversation_index:
        raise index_disabled()
    live = None
    for attempt in (1, 2):
        embedder, seen = app.embedder, live
        live = app.follower.live
        try:
            with app.pool.connection() as conn:
                hits = search_with_settings(conn, embedder, app.settings, scope, query)
                if live is not None:
                    generations.check(conn, live.id)
                return hits
        except (generations.GenerationChanged, psycopg.DataError):
            # a query of another dimension than the vectors' fails before the check
            if attempt == 2 or live is None or (seen is not None and seen.id == live.id):
                raise
            app.follower.expire()
    raise AssertionError("unreachable")


def index_status(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str
) -> dict[str, Any]:
    """Messages, conversations and chunks indexed, the last sync, the embedding model and
    dimension of the live index, and whether the configured model differs."""
    return {"agent_id": agent_id, **index.status(conn, scope.key(agent_id), app.settings)}


def reindex(app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str) -> UUID:
    """Rebuild the agent's index with the configured model, in the background; searches keep
    answering from the live index until the switch. The `reindex` operation's id."""
    if not app.settings.conversation_index:
        raise index_disabled()
    with conn.transaction():
        operation_id = index.request_reindex(conn, scope.key(agent_id))
    _hand_off(app.backend, OperationKind.REINDEX, operation_id)
    return operation_id


def check(app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str) -> Report:
    """What no longer matches the messages (read only)."""
    return repair_agents(app, conn, scope.key(agent_id), dry_run=True)


def repair(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    *,
    dry_run: bool = False,
) -> Report:
    """The consistency check, then its repair: orphaned and stale chunks and orphaned units
    are deleted; `repair` operations embed and index what is missing."""
    return repair_agents(app, conn, scope.key(agent_id), dry_run=dry_run)


def repair_agents(
    app: AppContext, conn: Connection[Any], agent_key: str | None, *, dry_run: bool = False
) -> Report:
    """`repair` of one agent by its stored key, or of every agent (None: operators, `memora
    repair`, the conversation_consistency job); `dry_run` only checks."""
    roles = app.settings.indexed_roles
    exclude = app.settings.conversation_exclude_patterns
    if dry_run:
        report = consistency.check(conn, agent_key, roles, exclude=exclude)
        conn.rollback()
        return report
    with conn.transaction():
        report = consistency.repair(conn, agent_key, roles, exclude=exclude)
    for operation_id, stage in report.operations:
        hand_off(app.backend, stage, operation_id)
    return report


@contextmanager
def _message(document_id: str, message_id: str) -> Iterator[None]:
    """The sync layer's MessageNotFound as the use case's NotFound."""
    try:
        yield
    except sync.MessageNotFound:
        raise NotFound(
            "not_found", f"message {message_id!r} of document {document_id!r} not found"
        ) from None


def _hand_off(backend: TaskBackend, kind: OperationKind, operation_id: UUID | None) -> None:
    if operation_id is not None:
        hand_off(backend, first_stage(kind), operation_id)
