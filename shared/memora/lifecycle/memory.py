"""remember, forget, restore, link and the memory's view: the lifecycle's core functions.

The API routes (and the MCP tools) call these with a tenant Scope, the client's agent id and an
`actor` (who asks: "api:<key id>", "job:consolidate"…) written to every audit event. Each
write runs in one transaction under the agent's lifecycle lock, so two remembers of the same
fact cannot both ADD it. The view (`view`) only reads, on the caller's connection: the write API
serves it, with no model loaded.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

import numpy as np
from psycopg import Connection
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, Field

from memora.basics.config import Settings
from memora.basics.errors import Conflict, Gone, Invalid, NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.entities import resolution as entities
from memora.extraction.base import Mention
from memora.lifecycle import changes, rules
from memora.lifecycle.limits import resolve as resolve_limits
from memora.lifecycle.rules import Decision, Statement, Thresholds, Verdict
from memora.lifecycle.scores import clamp_importance, heuristic_importance
from memora.nlp.embedding import TextEmbedder
from memora.nlp.llm import LLMClient
from memora.store import agents, evolution, links, memory_view
from memora.store import entities as entity_store
from memora.store import lifecycle as store
from memora.store.units import Unresolved
from memora.webhooks import events as webhooks

log = logging.getLogger("memora.lifecycle")

CONFLICT_MARKER = "You keep an agent's long-term memory consistent"
# statements found by their words that remember also compares (newest first): those holding all
# the statement's words, and those naming the subject of the attribute it sets
WORD_LOOKUP, SUBJECT_LOOKUP = 10, 50


@dataclass(frozen=True)
class RememberResult:
    decision: Decision
    memory_id: UUID  # the memory that now holds the fact
    reason: str
    superseded_id: UUID | None = None
    merged_into: UUID | None = None
    linked: list[UUID] = field(default_factory=list)
    decided_by: Literal["rules", "llm"] = "rules"


@dataclass(frozen=True)
class ForgetResult:
    forgotten: list[dict[str, Any]]  # id, text (and similarity for a query)
    dry_run: bool


class _LLMVerdict(BaseModel):
    decision: Literal["ADD", "SUPERSEDE", "MERGE", "SKIP"]
    memory: int | None = Field(default=None, description="number of the existing memory meant")
    reason: str = ""


def thresholds(s: Settings) -> Thresholds:
    return Thresholds(s.merge_similarity, s.supersede_similarity)


def statement(row: store.Neighbour) -> Statement:
    return Statement(row.text, frozenset(row.entities), row.id, row.similarity)


def mentions_of(text: str) -> list[Mention]:
    [found] = entities.find_mentions([Unresolved(uuid.uuid4(), text, utcnow(), None)])
    return list(found.mentions)


def candidates(
    conn: Connection[Any], key: str, text: str, vector: np.ndarray, nearest: int
) -> list[store.Neighbour]:
    """What a statement is compared with: its `nearest` neighbours by embedding, the statements
    holding all its words (a restatement in other case or punctuation embeds differently), and
    for an attribute, the statements naming its subject (an earlier value, however phrased)."""
    rows = store.similar(conn, key, vector, nearest)
    lookups = [(text, WORD_LOOKUP)]
    lookups += [(subject, SUBJECT_LOOKUP) for subject in changes.subjects(text)[:2]]
    seen = {r.id for r in rows}
    for words, limit in lookups:
        for r in store.mentioning(conn, key, words, vector, limit):
            if r.id not in seen:
                seen.add(r.id)
                rows.append(r)
    return rows


class Memories:
    """The lifecycle operations over one pool, embedder and (optional) LLM."""

    def __init__(
        self,
        settings: Settings,
        pool: ConnectionPool[Any],
        embedder: TextEmbedder,
        llm: LLMClient | None = None,
    ) -> None:
        self.settings, self.pool, self.embedder, self.llm = settings, pool, embedder, llm

    # ---------------------------------------------------------------------------- remember
    def remember(
        self,
        scope: Scope,
        agent_id: str,
        content: str,
        *,
        category: str | None = None,
        importance: float | None = None,
        related_to: list[UUID] | None = None,
        actor: str = "api",
    ) -> RememberResult:
        s = self.settings
        key = scope.key(agent_id)
        text = content.strip()
        if not text:
            raise Invalid("empty_content", "content must not be empty")
        if len(text) > s.max_content_chars:
            raise Invalid("content_too_long", f"at most {s.max_content_chars} characters")
        vector = self.embedder.embed([text])[0]
        found = mentions_of(text)
        now = utcnow()
        new = Statement(text, frozenset(m.name.casefold() for m in found), at=now)
        level = clamp_importance(
            importance if importance is not None else heuristic_importance(text, len(found))
        )
        with self.pool.connection() as conn, conn.transaction():
            agents.ensure_agent(conn, scope, agent_id)
            store.lock_agent(conn, key)
            related = self._own(conn, key, related_to or [])
            rows = candidates(conn, key, text, vector, s.remember_candidates)
            existing = [statement(r) for r in rows]
            verdict = rules.decide(new, existing, thresholds(s))
            by: Literal["rules", "llm"] = "rules"
            if verdict.decision is Decision.ADD or (
                verdict.decision is Decision.SUPERSEDE and not verdict.certain
            ):
                asked = self._ask_llm(
                    text, rules.borderline(existing, thresholds(s), s.remember_candidates)
                )
                if asked is not None:
                    verdict, by = asked, "llm"
            meta = {"source": "remember"}
            if verdict.decision is Decision.SKIP:
                assert verdict.target is not None
                return RememberResult(verdict.decision, verdict.target, verdict.reason)
            if verdict.decision is Decision.MERGE:
                assert verdict.target is not None
                old = next(r for r in rows if r.id == verdict.target)
                self._merge(conn, key, old, text, vector, meta, level, category, actor, verdict)
                self._link_related(conn, verdict.target, related, actor, key)
                return RememberResult(
                    verdict.decision,
                    verdict.target,
                    verdict.reason,
                    merged_into=verdict.target,
                    linked=related,
                    decided_by=by,
                )
            unit_id = uuid.uuid4()
            # a change the new statement dates holds from then; otherwise from now
            since = verdict.effective_at if verdict.decision is Decision.SUPERSEDE else None
            store.insert_unit(
                conn, key, unit_id, text=text, vector=vector, fact_type="world",
                importance=level, category=category, metadata=meta, at=now, valid_from=since,
            )  # fmt: skip
            self.index(conn, key, unit_id, found, now)
            store.record(conn, key, [unit_id], "added", actor, reason=verdict.reason)
            superseded = None
            if verdict.decision is Decision.SUPERSEDE:
                assert verdict.target is not None
                old = next(r for r in rows if r.id == verdict.target)
                change = store.Supersession(
                    old.id, unit_id, old.text, text, verdict.reason, self._decider(by),
                    until=since or now, effective_at=since,
                )  # fmt: skip
                if store.supersede(conn, key, change, actor, at=now):
                    superseded = verdict.target
                    webhooks.memory_superseded(conn, key, [old.id], unit_id, verdict.reason)
            self._link_related(conn, unit_id, related, actor, key)
        return RememberResult(
            verdict.decision, unit_id, verdict.reason, superseded, linked=related, decided_by=by
        )

    def _decider(self, by: Literal["rules", "llm"]) -> str:
        """Who decided, as the audit trail names it: "rules", or "llm:<model>"."""
        if by == "llm" and self.llm is not None:
            return f"llm:{self.llm.model_for('background')}"
        return by

    def _own(self, conn: Connection[Any], key: str, ids: list[UUID]) -> list[UUID]:
        ids = list(dict.fromkeys(ids))
        known = {r.id for r in store.get_units(conn, key, ids)}
        missing = [str(i) for i in ids if i not in known]
        if missing:
            raise NotFound("memory_not_found", f"no such memories: {', '.join(missing)}")
        return ids

    def index(
        self, conn: Connection[Any], key: str, unit_id: UUID, found: list[Mention], at: Any
    ) -> None:
        """Entities and links of a new or rewritten unit, as the pipeline's stages make them."""
        s = self.settings
        entity_store.unlink_units(conn, [unit_id])
        entities.resolve(
            conn,
            key,
            [entities.UnitMentions(unit_id, at, found)],
            entities.ResolutionWeights.from_settings(s),
        )
        links.build_links(conn, [unit_id], links.LinkSettings.from_settings(s))

    def _merge(
        self,
        conn: Connection[Any],
        key: str,
        old: store.Neighbour,
        text: str,
        vector: np.ndarray,
        meta: dict[str, Any],
        importance: float,
        category: str | None,
        actor: str,
        verdict: Verdict,
    ) -> None:
        kept = rules.richer(old.text, text)
        changed = kept != old.text
        store.merge_into(
            conn, old.id, text=kept, vector=vector if changed else None,
            metadata=rules.merge_metadata(old.metadata or {}, meta), importance=importance,
            category=category, evidence=1,
        )  # fmt: skip
        if changed:
            self.index(conn, key, old.id, mentions_of(kept), old.event_date)
        store.record(
            conn, key, [old.id], "merged", actor, reason=verdict.reason,
            details={"statement": text, "kept": "new" if changed else "existing",
                     "previous_text": old.text if changed else None},
        )  # fmt: skip

    def _link_related(
        self, conn: Connection[Any], unit_id: UUID, related: list[UUID], actor: str, key: str
    ) -> None:
        for other in related:
            if other != unit_id:
                store.add_link(conn, unit_id, other, "explicit", 1.0, "related_to")
                store.record(conn, key, [unit_id, other], "linked", actor, related_id=other,
                             details={"relationship": "related_to"})  # fmt: skip

    def _ask_llm(self, text: str, candidates: list[Statement]) -> Verdict | None:
        """The LLM's verdict on the borderline memories (None without an LLM or candidates;
        a failed call falls back to the rules)."""
        if self.llm is None or not candidates:
            return None
        listing = "\n".join(f"{i}. {c.text}" for i, c in enumerate(candidates, 1))
        messages = [
            {
                "role": "system",
                "content": f"{CONFLICT_MARKER}. Compare a NEW statement with EXISTING memories. "
                "SKIP: one of them says exactly the same. MERGE: one says the same fact (a "
                "restatement, possibly with less or more detail). SUPERSEDE: one states the same "
                "attribute of the same subject with a value that changed (moved, new job, new "
                "favourite, new relationship status), so the new statement replaces it. ADD: a "
                "different fact, even if similar. When unsure, ADD. Name the memory by number.",
            },
            {"role": "user", "content": f"EXISTING:\n{listing}\n\nNEW: {text}"},
        ]
        try:
            answer = self.llm.complete_json("background", messages, _LLMVerdict)
        except Exception as exc:  # the rules' verdict stands
            log.warning("conflict check by LLM failed; rules decide", extra={"error": str(exc)})
            return None
        decision = Decision(answer.decision)
        if decision is Decision.ADD:
            return Verdict(decision, None, answer.reason or "the LLM found no same fact")
        if answer.memory is None or not 1 <= answer.memory <= len(candidates):
            return None
        return Verdict(decision, candidates[answer.memory - 1].id, answer.reason or "LLM")

    # -------------------------------------------------------------------------------- edit
    def edit(
        self, scope: Scope, agent_id: str, memory_id: UUID, content: str, *, actor: str = "api"
    ) -> UUID:
        """The user's correction of an active memory: a new version with the new text (same
        fact type, importance and category) that supersedes it, holding over the old one's
        whole window; the old version stays, superseded, with its history (restorable).
        Returns the new version's id."""
        text = content.strip()
        if not text:
            raise Invalid("empty_content", "content must not be empty")
        if len(text) > self.settings.max_content_chars:
            raise Invalid(
                "content_too_long", f"at most {self.settings.max_content_chars} characters"
            )
        key = scope.key(agent_id)
        vector = self.embedder.embed([text])[0]
        found = mentions_of(text)
        now = utcnow()
        with self.pool.connection() as conn, conn.transaction():
            store.lock_agent(conn, key)
            rows = store.get_units(conn, key, [memory_id])
            if not rows:
                raise NotFound("memory_not_found", f"memory {memory_id} not found")
            old = rows[0]
            if old.status != "active":
                raise Conflict(
                    "memory_not_active", f"memory {memory_id} is {old.status}; restore it first"
                )
            if text == old.text:
                raise Invalid("unchanged", "the new text is the memory's current text")
            unit_id = uuid.uuid4()
            store.insert_unit(
                conn, key, unit_id, text=text, vector=vector, fact_type=old.fact_type,
                importance=old.importance, category=old.category,
                metadata={**old.metadata, "source": "edit", "edit_of": str(memory_id)},
                at=now, valid_from=old.valid_from,
            )  # fmt: skip
            self.index(conn, key, unit_id, found, now)
            reason = "edited by the user"
            store.record(conn, key, [unit_id], "added", actor, reason=reason,
                         related_id=memory_id, details={"edit_of": str(memory_id)})  # fmt: skip
            change = store.Supersession(
                memory_id, unit_id, old.text, text, reason, "user", until=old.valid_from
            )
            store.supersede(conn, key, change, actor, at=now)
            webhooks.memory_superseded(conn, key, [memory_id], unit_id, reason)
        return unit_id

    # ------------------------------------------------------------------------------ forget
    def forget(
        self,
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
        s = self.settings
        if (memory_id is None) == (query is None or not query.strip()):
            raise Invalid("bad_request", "give exactly one of memory_id and query")
        key = scope.key(agent_id)
        with self.pool.connection() as conn, conn.transaction():
            store.lock_agent(conn, key)
            if memory_id is not None:
                rows = store.get_units(conn, key, [memory_id])
                if not rows:
                    raise NotFound("memory_not_found", f"memory {memory_id} not found")
                targets: list[dict[str, Any]] = [{"id": rows[0].id, "text": rows[0].text}]
            else:
                assert query is not None
                vector = self.embedder.embed([query])[0]
                found = store.similar(
                    conn, key, vector, s.forget_query_cap + 1,
                    min_similarity=s.forget_query_min_similarity,
                    fact_types=("world", "agent", "opinion", "reflection"),
                )  # fmt: skip
                targets = [
                    {"id": r.id, "text": r.text, "similarity": round(r.similarity, 4)}
                    for r in found
                ]
                if len(targets) > s.forget_query_cap and not confirm and not dry_run:
                    raise Conflict(
                        "too_many_matches",
                        f"more than {s.forget_query_cap} memories match; look at them with "
                        "dry_run, then forget them by id or pass confirm",
                        {"matches": len(targets)},
                    )
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

    # ----------------------------------------------------------------------------- restore
    def restore(
        self, scope: Scope, agent_id: str, memory_id: UUID, *, actor: str = "api"
    ) -> dict[str, Any]:
        """Back to active: a forgotten memory within the retention period, an archived one
        within the agent's archive retention, a superseded one at any time. A superseded
        one's validity window opens again (its `valid_until` cleared, recorded in the event):
        undoing a supersede."""
        key = scope.key(agent_id)
        retention = timedelta(days=self.settings.forget_retention_days)
        with self.pool.connection() as conn, conn.transaction():
            store.lock_agent(conn, key)
            rows = store.get_units(conn, key, [memory_id])
            if not rows:
                raise NotFound("memory_not_found", f"memory {memory_id} not found")
            row = rows[0]
            if row.status == "active":
                return {"id": memory_id, "status": "active", "restored": False}
            forgotten_at = row.status_at if row.status == "forgotten" else None
            if forgotten_at is not None and forgotten_at < utcnow() - retention:
                raise Gone(
                    "retention_expired",
                    f"forgotten more than {self.settings.forget_retention_days:g} days ago",
                )
            if row.status == "archived":
                self._within_archive_retention(conn, key, row.status_at)
            store.set_status(conn, key, [memory_id], "active", reason=None, at=utcnow())
            cleared = row.valid_until.isoformat() if row.valid_until else None
            store.record(
                conn, key, [memory_id], "restored", actor,
                details={"from": row.status, "superseded_by": str(row.superseded_by or ""),
                         "valid_until_cleared": cleared},
            )  # fmt: skip
        return {"id": memory_id, "status": "active", "restored": True, "was": row.status}

    def _within_archive_retention(
        self, conn: Connection[Any], key: str, archived_at: datetime | None
    ) -> None:
        """Gone when archived longer ago than the agent's archive retention (cleanup purges)."""
        kept = resolve_limits(self.settings, evolution.agent_limits(conn, key))
        days = kept.archive_retention_days
        if days is not None and archived_at and archived_at < utcnow() - timedelta(days=days):
            raise Gone("retention_expired", f"archived more than {days:g} days ago")

    # -------------------------------------------------------------------------------- link
    def link(
        self,
        scope: Scope,
        agent_id: str,
        memory_id: UUID,
        related_id: UUID,
        relationship: str,
        *,
        weight: float = 1.0,
        actor: str = "api",
    ) -> dict[str, Any]:
        if memory_id == related_id:
            raise Invalid("bad_request", "a memory cannot be linked to itself")
        key = scope.key(agent_id)
        with self.pool.connection() as conn, conn.transaction():
            self._own(conn, key, [memory_id, related_id])
            store.add_link(conn, memory_id, related_id, "explicit", weight, relationship)
            store.record(
                conn, key, [memory_id, related_id], "linked", actor,
                details={"relationship": relationship, "between": [str(memory_id),
                                                                   str(related_id)]},
            )  # fmt: skip
        return {"memory_id": memory_id, "related_memory_id": related_id,
                "relationship": relationship, "weight": weight}  # fmt: skip


def view(conn: Connection[Any], scope: Scope, agent_id: str, memory_id: UUID) -> dict[str, Any]:
    """One memory in full, in any status (`GET /api/agents/{agent_id}/memories/{id}`): its
    text, dates, confidence and metadata, its lifecycle state (status, when and why it last
    changed, what superseded it), source document and access counts; the entities it names;
    its links (explicit first, then the strongest; 50 at most); its history (every audit
    event, oldest first) and the memories it replaced. Reads only: no model, no lock."""
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
