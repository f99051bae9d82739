"""Accepting content: durable in PostgreSQL first, then handed to the pipeline."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.errors import Invalid
from memora.basics.models import MemoryItem, jsonable_items
from memora.basics.stages import INGEST_STAGES, OperationKind, Stage
from memora.basics.tenancy import Scope
from memora.conversations import append as appending
from memora.conversations.sync import store_messages
from memora.nlp.chunking import ChunkingConfig
from memora.pipeline.context import AppContext
from memora.pipeline.handoff import TaskBackend, hand_off
from memora.store import agents, append_operations, documents, evolution, operations


@dataclass(frozen=True)
class Accepted:
    agent_id: str  # as the client named it
    document_id: str
    operation_id: UUID
    outcome: documents.Outcome
    items_count: int

    @property
    def needs_processing(self) -> bool:
        return self.outcome != "unchanged"


def ingest(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    items: list[MemoryItem],
    document_id: str | None = None,
    *,
    title: str | None = None,
    backfill: bool = False,
) -> Accepted:
    """`POST /api/memories/batch`: check the batch against the input limits, make it durable
    (`accept_batch`), then hand its first stage to the pipeline (on the backfill queues for a
    backfill). Invalid (`too_many_items`, `content_too_long`) before anything is written."""
    check_limits(app.settings, items)
    accepted = accept_batch(
        conn, scope, agent_id, items, document_id, title=title, backfill=backfill
    )
    metrics.observe_accepted(accepted.outcome, accepted.items_count, backfill=backfill)
    hand_off_accepted(app.backend, [accepted], backfill=backfill)
    return accepted


def check_limits(settings: Settings, items: list[MemoryItem]) -> None:
    if len(items) > settings.max_items_per_batch:
        raise Invalid("too_many_items", f"at most {settings.max_items_per_batch} items per batch")
    too_long = [i for i, item in enumerate(items) if len(item.content) > settings.max_content_chars]
    if too_long:
        raise Invalid(
            "content_too_long",
            f"item content is limited to {settings.max_content_chars} characters",
            {"items": too_long[:20]},
        )


def hand_off_accepted(
    backend: TaskBackend, accepted: list[Accepted], *, backfill: bool = False
) -> None:
    """The pipeline's first stage for each accepted document that needs processing."""
    for a in accepted:
        if a.needs_processing:
            hand_off(backend, INGEST_STAGES[0], a.operation_id, backfill=backfill)


def accept_batch(
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    items: list[MemoryItem],
    document_id: str | None = None,
    *,
    title: str | None = None,
    backfill: bool = False,
    verbatim: bool = False,
) -> Accepted:
    """Store the raw items and create the operation, in one transaction (committed here).
    The operation records its priority, so that the reconciler can put it back on its own
    queues.

    Re-posting a document_id with identical items creates nothing and returns the operation
    that processed it; changed items replace the document's memories; a document in the trash
    is a Conflict (`document_trashed`). `verbatim`: the items are facts already (seeds,
    dialogue): each becomes one unit as written, no extractor.
    """
    document_id = document_id or f"doc-{uuid.uuid4()}"
    payload = jsonable_items(items)
    with conn.transaction():
        agents.ensure_agent(conn, scope, agent_id)
        doc = documents.upsert_document(conn, scope, agent_id, document_id, payload, title)
        if doc.trashed:
            raise appending.in_the_trash(document_id)
        if doc.outcome == "unchanged" and doc.operation_id is not None:
            op_id = doc.operation_id
        else:
            op_id = operations.create_operation(
                conn,
                scope,
                agent_id,
                kind=OperationKind.INGEST,
                first_stage=INGEST_STAGES[0],
                document_pk=doc.pk,
                document_id=document_id,
                payload={"priority": "backfill" if backfill else "live"}
                | ({"verbatim": True} if verbatim else {}),
                counts={"items": len(items)},
            )
            store_messages(conn, scope.key(agent_id), doc.pk, payload, op_id, retitled=doc.retitled)
            documents.set_current_operation(conn, doc.pk, op_id)
    return Accepted(agent_id, document_id, op_id, doc.outcome, len(items))


# ------------------------------------------------------------------------------ appends
@dataclass(frozen=True)
class AppendAccepted:
    agent_id: str  # as the client named it
    document_id: str  # the conversation
    operation_id: UUID
    outcome: appending.Outcome
    new: int  # messages stored by this append
    existing: int  # messages the conversation already held (a retry)


def append(
    app: AppContext,
    conn: Connection[Any],
    scope: Scope,
    agent_id: str,
    conversation_id: str,
    items: list[MemoryItem],
    *,
    title: str | None = None,
    backfill: bool = False,
    end_of_conversation: bool = False,
) -> AppendAccepted:
    """`POST /api/agents/{agent_id}/conversations/{conversation_id}/messages` (and the batch
    route's `update_mode: append`): the new messages made durable and handed to an `append`
    operation that processes them alone, or with the conversation's messages that joined it
    before its extract started (coalescing; memora.conversations.append). Exactly once: a
    message id the conversation holds is not stored again; with other content it is a
    Conflict. Invalid before anything is written. `end_of_conversation`: the operation asks
    for an `evolve` of the agent when it finishes (at once when it has finished already)."""
    settings = app.settings
    check_limits(settings, items)
    payload = _identified(jsonable_items(items))
    chunking = ChunkingConfig.from_settings(settings) if settings.conversation_index else None
    take = _AppendOperation(settings, conn, scope, agent_id, conversation_id, backfill)
    with conn.transaction():
        agents.ensure_agent(conn, scope, agent_id)
        done = appending.append_messages(
            conn, scope.key(agent_id), conversation_id, payload, title, take, chunking
        )
        evolve = None
        if end_of_conversation and not evolution.evolve_when_finished(conn, done.operation_id):
            evolve = evolution.create_evolve(conn, scope.key(agent_id), "end_of_conversation")
    if evolve is not None:
        hand_off(app.backend, Stage.EVOLVE, evolve)
    metrics.observe_accepted(done.outcome, done.new, backfill=backfill)
    if done.outcome != "unchanged" and not done.joined:
        hand_off(
            app.backend,
            INGEST_STAGES[0],
            done.operation_id,
            backfill=backfill,
            delay=take.hold,
            held=take.held,
        )
    return AppendAccepted(
        agent_id, conversation_id, done.operation_id, done.outcome, done.new, done.existing
    )


@dataclass
class _AppendOperation:
    """The operation an append's messages go to: the conversation's pending append when they
    may join it, else a new one. A new one is held `hold` seconds before its extract, so that
    the next messages can join, only in a burst (the conversation was written less than the
    hold ago): a live chat's message, seconds after the one before, starts at once. While the
    conversation's previous operation is not yet embedded, the new one is held after it
    (`held`): that one's embed releases it, `hold` is then only the bound
    (memora.store.append_operations). A conversation that is behind thus gets bigger
    operations, which cost less per message, without a fixed wait."""

    settings: Settings
    conn: Connection[Any]
    scope: Scope
    agent_id: str
    conversation_id: str
    backfill: bool
    hold: float = 0.0
    held: bool = False

    def __call__(self, doc: documents.Conversation, new: int) -> tuple[UUID, bool]:
        pending, limit = doc.last_operation_id, self.settings.append_coalesce_messages
        if (
            pending is not None
            and new < limit
            and append_operations.join(
                self.conn, pending, new, backfill=self.backfill, max_items=limit
            )
        ):
            return pending, True
        payload = {"priority": "backfill" if self.backfill else "live"}
        if doc.current_operation_id:
            payload["base"] = str(doc.current_operation_id)
        if limit > 1 and pending is not None:
            window = self.settings.append_coalesce_ms / 1000
            previous = append_operations.previous(self.conn, pending, window)
            if previous.recent:  # a burst: the next messages are likely to join
                self.hold = window
            if previous.behind:
                self.held = True
                self.hold = max(self.hold, self.settings.append_coalesce_busy_ms / 1000)
                payload |= append_operations.held_after(pending)
        created = operations.create_operation(
            self.conn,
            self.scope,
            self.agent_id,
            kind=OperationKind.APPEND,
            first_stage=INGEST_STAGES[0],
            document_pk=doc.pk,
            document_id=self.conversation_id,
            payload=payload,
            counts={"items": new},
        )
        return created, False


def _identified(payload: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message with its id (derived when the client gave none); Invalid when one id
    appears twice."""
    for item in payload:
        item.setdefault("message_id", derived_message_id(item))
    ids = [item["message_id"] for item in payload]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise Invalid(
            "duplicate_message_id",
            f"message_id {repeated[0]!r} appears twice in the request",
            {"message_ids": repeated},
        )
    return payload


def derived_message_id(item: dict[str, Any]) -> str:
    """The id of a message its client did not name (the batch route's append mode): a hash of
    what it says, who said it and when, so that re-sending it is recognised."""
    key = {k: item.get(k) for k in ("content", "speaker", "role", "event_date")}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return f"h-{digest[:24]}"
