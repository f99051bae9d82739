"""Accepting content: durable in PostgreSQL first, then handed to the pipeline."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.models import MemoryItem, jsonable_items
from memora.basics.stages import INGEST_STAGES, OperationKind
from memora.basics.tenancy import Scope
from memora.conversations.sync import store_messages
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
