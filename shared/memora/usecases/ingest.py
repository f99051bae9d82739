"""Accepting content: durable in PostgreSQL first, then handed to the pipeline."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.errors import Invalid
from memora.basics.models import MemoryItem, jsonable_items
from memora.basics.stages import INGEST_STAGES, OperationKind
from memora.basics.tenancy import Scope
from memora.conversations.sync import store_messages
from memora.pipeline.handoff import TaskBackend, hand_off
from memora.store import agents, documents, operations


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
    conn: Connection[Any],
    backend: TaskBackend,
    settings: Settings,
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
    check_limits(settings, items)
    accepted = accept_batch(
        conn, scope, agent_id, items, document_id, title=title, backfill=backfill
    )
    metrics.observe_accepted(accepted.outcome, accepted.items_count, backfill=backfill)
    hand_off_accepted(backend, [accepted], backfill=backfill)
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
    that processed it; changed items replace the document's memories. `verbatim`: the items
    are facts already (seeds, dialogue): each becomes one unit as written, no extractor.
    """
    document_id = document_id or f"doc-{uuid.uuid4()}"
    payload = jsonable_items(items)
    with conn.transaction():
        agents.ensure_agent(conn, scope, agent_id)
        doc = documents.upsert_document(conn, scope, agent_id, document_id, payload, title)
        if doc.outcome == "unchanged" and doc.operation_id is not None:
            op_id = doc.operation_id
        else:
            store_messages(conn, scope.key(agent_id), doc.pk, payload, retitled=doc.retitled)
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
            documents.set_current_operation(conn, doc.pk, op_id)
    return Accepted(agent_id, document_id, op_id, doc.outcome, len(items))
