"""document_expiry: documents whose time is up are deleted for real, as `DELETE` of a document
deletes them (`memora.store.documents.delete_stored`), each with its `document.deleted` event
(`expired` says why):

- `trash`: in the trash for longer than MEMORA_TRASH_RETENTION_DAYS;
- `temporary`: a temporary chat (every message of it stored `temporary`: `remember = false`)
  unchanged for longer than MEMORA_TEMPORARY_CHAT_RETENTION_DAYS (unset: kept).

One transaction per document, which checks again, under the document's lock, that it is still
due (restored, or written to, meanwhile: kept); at most MEMORA_JOB_BATCH_SIZE documents of each
kind per run, oldest first, the next run goes on from there."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection

from memora.basics.models import utcnow
from memora.basics.tenancy import client_agent_id
from memora.jobs.base import JobContext, JobResult
from memora.store import documents, trash
from memora.store.trash import Expiry
from memora.webhooks import events as webhooks


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    now = utcnow()
    retention: dict[Expiry, float | None] = {
        "trash": s.trash_retention_days,
        "temporary": s.temporary_chat_retention_days,
    }
    result = JobResult(details={"trash": 0, "temporary": 0, "units_deleted": 0})
    with ctx.pool.connection() as conn:
        for expiry, days in retention.items():
            if days is None:
                continue
            before = now - timedelta(days=days)
            _expire(ctx, conn, expiry, before, result)
        webhooks.dispatch_committed(conn, ctx.backend)
    return result


def _expire(
    ctx: JobContext, conn: Connection[Any], expiry: Expiry, before: datetime, result: JobResult
) -> None:
    due = trash.due(conn, expiry, before, ctx.settings.job_batch_size, agent_key=ctx.agent_key)
    result.examined += len(due)
    for doc in due:
        with conn.transaction():
            if not trash.still_due(conn, expiry, doc.pk, before):
                continue
            deleted = documents.delete_stored(conn, doc.agent_id, doc.document_id)
            if deleted is None:
                continue
            webhooks.document_deleted(
                conn, webhooks.tenant_of(doc.agent_id), client_agent_id(doc.agent_id),
                doc.document_id, deleted, expired=expiry,
            )  # fmt: skip
        result.changed += 1
        result.details[expiry] += 1
        result.details["units_deleted"] += deleted["units_deleted"]
