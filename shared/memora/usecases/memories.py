"""The memory lifecycle's other use cases (seed 002 parts 3–4): edit, forget, restore, link and
one memory's view; remember is memora.usecases.remember.

Each takes a tenant Scope, the client's agent id and an `actor` (who asks: "api:<key id>",
"job:consolidate"…) written to every audit event. Each write embeds first, then runs in one
transaction under the agent's lifecycle lock. The view only reads, on the caller's connection:
the write API serves it, with no model loaded.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Conflict, Gone, Invalid, NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.lifecycle.limits import resolve as resolve_limits
from memora.lifecycle.memory import ForgetResult, index, mentions_of
from memora.pipeline.context import AppContext, pinning
from memora.store import evolution, memory_view, trash
from memora.store import lifecycle as store
from memora.webhooks import events as webhooks

# what forget by query looks at
FORGETTABLE = ("world", "agent", "opinion", "reflection")


@pinning
def edit(
    app: AppContext,
    scope: Scope,
    agent_id: str,
    memory_id: UUID,
    content: str,
    *,
    actor: str = "api",
) -> UUID:
    """The user's correction of an active memory: a new version with the new text (same
    fact type, importance and category) that supersedes it, holding over the old one's
    whole window; the old version stays, superseded, with its history (restorable).
    Returns the new version's id."""
    text = content.strip()
    if not text:
        raise Invalid("empty_content", "content must not be empty")
    if len(text) > app.settings.max_content_chars:
        raise Invalid("content_too_long", f"at most {app.settings.max_content_chars} characters")
    key = scope.key(agent_id)
    vector = app.embedder.embed([text])[0]
    found = mentions_of(text)
    now = utcnow()
    with app.pool.connection() as conn:
        with conn.transaction():
            store.lock_agent(conn, key)
            old = _active(conn, key, memory_id)
            if text == old.text:
                raise Invalid("unchanged", "the new text is the memory's current text")
            unit_id = uuid.uuid4()
            store.insert_unit(
                conn, key, unit_id, text=text, vector=vector, fact_type=old.fact_type,
                importance=old.importance, category=old.category,
                metadata={**old.metadata, "source": "edit", "edit_of": str(memory_id)},
                at=now, valid_from=old.valid_from,
            )  # fmt: skip
            index(conn, app.settings, key, unit_id, found, now, text)
            reason = "edited by the user"
            store.record(conn, key, [unit_id], "added", actor, reason=reason,
                         related_id=memory_id, details={"edit_of": str(memory_id)})  # fmt: skip
            change = store.Supersession(
                memory_id, unit_id, old.text, text, reason, "user", until=old.valid_from
            )
            store.supersede(conn, key, change, actor, at=now)
            webhooks.memory_superseded(conn, key, [memory_id], unit_id, reason)
        webhooks.dispatch_committed(conn, app.backend)
    return unit_id


def _active(conn: Connection[Any], key: str, memory_id: UUID) -> store.MemoryUnit:
    rows = store.get_units(conn, key, [memory_id])
    if not rows:
        raise NotFound("memory_not_found", f"memory {memory_id} not found")
    if rows[0].status != "active":
        raise Conflict(
            "memory_not_active", f"memory {memory_id} is {rows[0].status}; restore it first"
        )
    return rows[0]


def forget(
    app: AppContext,
    scope: Scope,
    agent_id: str,
    *,
    memory_id: UUID | None = None,
    query: str | None = None,
    reason: str | None = None,
    dry_run: bool = False,
    confirm: bool = False,
    actor: str = "api",
) -> ForgetResult:
    """Soft delete: status forgotten, out of every retriever, restorable for the retention
    period. By query: only memories at least `forget_query_min_similarity` similar, at most
    `forget_query_cap` of them unless `confirm`; `dry_run` lists them and changes nothing."""
    if (memory_id is None) == (query is None or not query.strip()):
        raise Invalid("bad_request", "give exactly one of memory_id and query")
    key = scope.key(agent_id)
    vector = app.embedder.embed([query])[0] if query is not None and memory_id is None else None
    with app.pool.connection() as conn, conn.transaction():
        store.lock_agent(conn, key)
        if memory_id is not None:
            targets = _by_id(conn, key, memory_id)
        else:
            targets = _by_query(app, conn, key, vector, confirm=confirm or dry_run)
        if dry_run:
            return ForgetResult(targets, dry_run=True)
        done = set(
            store.set_status(
                conn, key, [t["id"] for t in targets], "forgotten", reason=reason,
                at=utcnow(), from_statuses=("active", "superseded", "archived"),
            )
        )  # fmt: skip
        store.record(conn, key, sorted(done, key=str), "forgotten", actor, reason=reason)
    return ForgetResult([t for t in targets if t["id"] in done], dry_run=False)


def _by_id(conn: Connection[Any], key: str, memory_id: UUID) -> list[dict[str, Any]]:
    rows = store.get_units(conn, key, [memory_id])
    if not rows:
        raise NotFound("memory_not_found", f"memory {memory_id} not found")
    return [{"id": rows[0].id, "text": rows[0].text}]


def _by_query(
    app: AppContext, conn: Connection[Any], key: str, vector: Any, *, confirm: bool
) -> list[dict[str, Any]]:
    """The memories similar enough to the query; Conflict past the cap unless `confirm`."""
    s = app.settings
    found = store.similar(
        conn, key, vector, s.forget_query_cap + 1,
        min_similarity=s.forget_query_min_similarity, fact_types=FORGETTABLE,
    )  # fmt: skip
    targets = [{"id": r.id, "text": r.text, "similarity": round(r.similarity, 4)} for r in found]
    if len(targets) > s.forget_query_cap and not confirm:
        raise Conflict(
            "too_many_matches",
            f"more than {s.forget_query_cap} memories match; look at them with "
            "dry_run, then forget them by id or pass confirm",
            {"matches": len(targets)},
        )
    return targets


def restore(
    app: AppContext, scope: Scope, agent_id: str, memory_id: UUID, *, actor: str = "api"
) -> dict[str, Any]:
    """Back to active: a forgotten memory within the retention period, an archived one
    within the agent's archive retention, a superseded one at any time; not one whose
    document is in the trash (Conflict `document_trashed`). A superseded
    one's validity window opens again (its `valid_until` cleared, recorded in the event):
    undoing a supersede."""
    key = scope.key(agent_id)
    retention = timedelta(days=app.settings.forget_retention_days)
    with app.pool.connection() as conn, conn.transaction():
        store.lock_agent(conn, key)
        rows = store.get_units(conn, key, [memory_id])
        if not rows:
            raise NotFound("memory_not_found", f"memory {memory_id} not found")
        row = rows[0]
        if row.status == "active":
            return {"id": memory_id, "status": "active", "restored": False}
        _not_in_the_trash(conn, key, memory_id)
        forgotten_at = row.status_at if row.status == "forgotten" else None
        if forgotten_at is not None and forgotten_at < utcnow() - retention:
            raise Gone(
                "retention_expired",
                f"forgotten more than {app.settings.forget_retention_days:g} days ago",
            )
        if row.status == "archived":
            _within_archive_retention(app, conn, key, row.status_at)
        store.set_status(conn, key, [memory_id], "active", reason=None, at=utcnow())
        cleared = row.valid_until.isoformat() if row.valid_until else None
        store.record(
            conn, key, [memory_id], "restored", actor,
            details={"from": row.status, "superseded_by": str(row.superseded_by or ""),
                     "valid_until_cleared": cleared},
        )  # fmt: skip
    return {"id": memory_id, "status": "active", "restored": True, "was": row.status}


def _not_in_the_trash(conn: Connection[Any], key: str, memory_id: UUID) -> None:
    """Conflict when the memory's document is in the trash: only the document's restore
    brings its memories back."""
    document_id = trash.trashed_document(conn, key, memory_id)
    if document_id is not None:
        raise Conflict(
            "document_trashed",
            f"memory {memory_id} belongs to document {document_id!r}, which is in the trash: "
            "restore the document",
            {"document_id": document_id},
        )


def _within_archive_retention(
    app: AppContext, conn: Connection[Any], key: str, archived_at: datetime | None
) -> None:
    """Gone when archived longer ago than the agent's archive retention (cleanup purges)."""
    kept = resolve_limits(app.settings, evolution.agent_limits(conn, key))
    days = kept.archive_retention_days
    if days is not None and archived_at and archived_at < utcnow() - timedelta(days=days):
        raise Gone("retention_expired", f"archived more than {days:g} days ago")


def link(
    app: AppContext,
    scope: Scope,
    agent_id: str,
    memory_id: UUID,
    related_id: UUID,
    relationship: str,
    *,
    weight: float = 1.0,
    actor: str = "api",
) -> dict[str, Any]:
    """A typed link, both ways, between two of the agent's memories (link type `explicit`)."""
    if memory_id == related_id:
        raise Invalid("bad_request", "a memory cannot be linked to itself")
    key = scope.key(agent_id)
    with app.pool.connection() as conn, conn.transaction():
        known = {r.id for r in store.get_units(conn, key, [memory_id, related_id])}
        missing = [str(i) for i in (memory_id, related_id) if i not in known]
        if missing:
            raise NotFound("memory_not_found", f"no such memories: {', '.join(missing)}")
        store.add_link(conn, memory_id, related_id, "explicit", weight, relationship)
        store.record(
            conn, key, [memory_id, related_id], "linked", actor,
            details={"relationship": relationship, "between": [str(memory_id),
                                                               str(related_id)]},
        )  # fmt: skip
    return {"memory_id": memory_id, "related_memory_id": related_id,
            "relationship": relationship, "weight": weight}  # fmt: skip


def view(
    app: AppContext, conn: Connection[Any], scope: Scope, agent_id: str, memory_id: UUID
) -> dict[str, Any]:
    """One memory in full, in any status (`GET /api/agents/{agent_id}/memories/{id}`), on the
    caller's connection: its text, dates, confidence and metadata, its lifecycle state
    (status, when and why it last changed, what superseded it), source document and access
    counts; the entities it names; its links (explicit first, then the strongest; 50 at most);
    its history (every audit event, oldest first) and the memories it replaced. Reads only:
    no model, no lock."""
    row = memory_view.memory_detail(conn, scope.key(agent_id), memory_id)
    if row is None:
        raise NotFound("memory_not_found", f"memory {memory_id} not found for agent {agent_id}")
    return {
        **asdict(row),
        "agent_id": agent_id,
        "entities": [asdict(e) for e in memory_view.entities_of(conn, memory_id)],
        "links": [asdict(link) for link in memory_view.links_of(conn, memory_id)],
        "history": [asdict(e) for e in memory_view.history(conn, memory_id)],
        "replaced": memory_view.superseding(conn, memory_id),
    }
