"""remember (seed 002 §4.4.1): store a statement, or SKIP, MERGE or SUPERSEDE a memory holding
the same fact, decided by the rules (memora.lifecycle.rules) and, on a borderline case, the LLM.

Like a pipeline stage, it computes outside the lock: the statement is embedded and parsed, the
memories it is compared with are read and the verdict made (the LLM asked) without holding
anything. Then one transaction takes the agent's lifecycle lock, reads those memories again and
writes, so two remembers of the same fact cannot both ADD it. When they changed in between
(another remember or a job wrote), the verdict is made again; after the last attempt it is the
rules' alone, under the lock, where no LLM is called.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.errors import Invalid, NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.extraction.base import Mention
from memora.lifecycle import rules
from memora.lifecycle.memory import (
    RememberResult,
    ask_llm,
    candidates,
    decider,
    index,
    mentions_of,
    statement,
    thresholds,
)
from memora.lifecycle.rules import Decision, Statement, Verdict
from memora.lifecycle.scores import clamp_importance, heuristic_importance
from memora.nlp.llm import LLMClient
from memora.pipeline.context import AppContext, pinning
from memora.store import agents
from memora.store import lifecycle as store
from memora.webhooks import events as webhooks

log = logging.getLogger("memora.lifecycle")

# verdicts made outside the lock before the last one is made under it by the rules alone
ATTEMPTS = 3
By = Literal["rules", "llm"]


@dataclass(frozen=True)
class _New:
    """The statement to remember, computed before any lock."""

    text: str
    vector: np.ndarray
    mentions: list[Mention]
    importance: float
    at: datetime

    @property
    def statement(self) -> Statement:
        return Statement(self.text, frozenset(m.name.casefold() for m in self.mentions), at=self.at)


@dataclass(frozen=True)
class _Decided:
    existing: list[Statement]  # what the verdict was made on
    verdict: Verdict
    by: By


@dataclass(frozen=True)
class _Request:
    key: str
    new: _New
    category: str | None
    related: list[UUID]
    actor: str


@pinning
def remember(
    app: AppContext,
    scope: Scope,
    agent_id: str,
    content: str,
    *,
    category: str | None = None,
    importance: float | None = None,
    related_to: list[UUID] | None = None,
    actor: str = "api",
) -> RememberResult:
    """ADD, or SKIP (same text), MERGE (near-duplicate) or SUPERSEDE (a changed attribute);
    the memories `related_to` are linked to the one that holds the fact."""
    new = _prepare(app, content, importance)
    req = _Request(scope.key(agent_id), new, category, list(dict.fromkeys(related_to or [])), actor)
    llm = app.llm_if_configured()
    for attempt in range(ATTEMPTS + 1):
        decided = _decide_unlocked(app, req, llm) if attempt < ATTEMPTS else None
        with app.pool.connection() as conn:
            with conn.transaction():
                agents.ensure_agent(conn, scope, agent_id)
                store.lock_agent(conn, req.key)
                result = _locked(app, conn, req, decided, llm)
            webhooks.dispatch_committed(conn, app.backend)
        if result is not None:
            return result
    raise AssertionError("the last attempt decides under the lock")


def _prepare(app: AppContext, content: str, importance: float | None) -> _New:
    """Check the content, embed it and find the names it mentions (no connection held)."""
    text = content.strip()
    if not text:
        raise Invalid("empty_content", "content must not be empty")
    if len(text) > app.settings.max_content_chars:
        raise Invalid("content_too_long", f"at most {app.settings.max_content_chars} characters")
    vector = app.embedder.embed([text])[0]
    found = mentions_of(text)
    level = clamp_importance(
        importance if importance is not None else heuristic_importance(text, len(found))
    )
    return _New(text, vector, found, level, utcnow())


def _own(conn: Connection[Any], key: str, ids: list[UUID]) -> None:
    """NotFound unless the agent holds every memory of `ids`."""
    known = {r.id for r in store.get_units(conn, key, ids)}
    missing = [str(i) for i in ids if i not in known]
    if missing:
        raise NotFound("memory_not_found", f"no such memories: {', '.join(missing)}")


def _decide(
    app: AppContext, new: _New, existing: list[Statement], llm: LLMClient | None
) -> _Decided:
    """The rules' verdict; an ADD or an uncertain SUPERSEDE goes to the LLM when there is one."""
    t = thresholds(app.settings)
    verdict = rules.decide(new.statement, existing, t)
    if verdict.decision is Decision.ADD or (
        verdict.decision is Decision.SUPERSEDE and not verdict.certain
    ):
        limit = app.settings.remember_candidates
        asked = ask_llm(llm, new.text, rules.borderline(existing, t, limit))
        if asked is not None:
            return _Decided(existing, asked, "llm")
    return _Decided(existing, verdict, "rules")


def _decide_unlocked(app: AppContext, req: _Request, llm: LLMClient | None) -> _Decided:
    """The verdict on what the agent holds now, read without a lock (the LLM asked here)."""
    with app.pool.connection() as conn:
        _own(conn, req.key, req.related)
        rows = candidates(
            conn, req.key, req.new.text, req.new.vector, app.settings.remember_candidates
        )
        conn.rollback()  # nothing held while the LLM answers
    return _decide(app, req.new, [statement(r) for r in rows], llm)


def _locked(
    app: AppContext,
    conn: Connection[Any],
    req: _Request,
    decided: _Decided | None,
    llm: LLMClient | None,
) -> RememberResult | None:
    """Under the agent's lock: write the verdict when what it was made on still holds (None:
    it changed, decide again); without one (the last attempt), the rules decide here."""
    _own(conn, req.key, req.related)
    rows = candidates(conn, req.key, req.new.text, req.new.vector, app.settings.remember_candidates)
    existing = [statement(r) for r in rows]
    if decided is None:
        log.info("remember decided under the lock by the rules", extra={"agent": req.key})
        decided = _decide(app, req.new, existing, None)
    elif decided.existing != existing:
        return None
    return _write(app, conn, req, rows, decided, llm)


def _write(
    app: AppContext,
    conn: Connection[Any],
    req: _Request,
    rows: list[store.Neighbour],
    decided: _Decided,
    llm: LLMClient | None,
) -> RememberResult:
    verdict, by, new, key = decided.verdict, decided.by, req.new, req.key
    if verdict.decision is Decision.SKIP:
        assert verdict.target is not None
        return RememberResult(verdict.decision, verdict.target, verdict.reason)
    if verdict.decision is Decision.MERGE:
        assert verdict.target is not None
        old = next(r for r in rows if r.id == verdict.target)
        _merge(app, conn, req, old, verdict)
        _link_related(conn, req, verdict.target)
        return RememberResult(
            verdict.decision, verdict.target, verdict.reason, merged_into=verdict.target,
            linked=req.related, decided_by=by,
        )  # fmt: skip
    unit_id = uuid.uuid4()
    # a change the new statement dates holds from then; otherwise from now
    since = verdict.effective_at if verdict.decision is Decision.SUPERSEDE else None
    store.insert_unit(
        conn, key, unit_id, text=new.text, vector=new.vector, fact_type="world",
        importance=new.importance, category=req.category, metadata={"source": "remember"},
        at=new.at, valid_from=since,
    )  # fmt: skip
    index(conn, app.settings, key, unit_id, new.mentions, new.at, new.text)
    store.record(conn, key, [unit_id], "added", req.actor, reason=verdict.reason)
    superseded = None
    if verdict.decision is Decision.SUPERSEDE:
        assert verdict.target is not None
        old = next(r for r in rows if r.id == verdict.target)
        change = store.Supersession(
            old.id, unit_id, old.text, new.text, verdict.reason, decider(by, llm),
            until=since or new.at, effective_at=since,
        )  # fmt: skip
        if store.supersede(conn, key, change, req.actor, at=new.at):
            superseded = verdict.target
            webhooks.memory_superseded(conn, key, [old.id], unit_id, verdict.reason)
    _link_related(conn, req, unit_id)
    return RememberResult(
        verdict.decision, unit_id, verdict.reason, superseded, linked=req.related, decided_by=by
    )


def _merge(
    app: AppContext, conn: Connection[Any], req: _Request, old: store.Neighbour, verdict: Verdict
) -> None:
    """The new statement merged into `old`: the richer text is kept (re-indexed if it is the
    new one), the metadata merged, the evidence counted."""
    text, meta = req.new.text, {"source": "remember"}
    kept = rules.richer(old.text, text)
    changed = kept != old.text
    store.merge_into(
        conn, old.id, text=kept, vector=req.new.vector if changed else None,
        metadata=rules.merge_metadata(old.metadata or {}, meta),
        importance=req.new.importance, category=req.category, evidence=1,
    )  # fmt: skip
    if changed:
        index(conn, app.settings, req.key, old.id, mentions_of(kept), old.event_date, kept)
    store.record(
        conn, req.key, [old.id], "merged", req.actor, reason=verdict.reason,
        details={"statement": text, "kept": "new" if changed else "existing",
                 "previous_text": old.text if changed else None},
    )  # fmt: skip


def _link_related(conn: Connection[Any], req: _Request, unit_id: UUID) -> None:
    for other in req.related:
        if other != unit_id:
            store.add_link(conn, unit_id, other, "explicit", 1.0, "related_to")
            store.record(conn, req.key, [unit_id, other], "linked", req.actor, related_id=other,
                         details={"relationship": "related_to"})  # fmt: skip
