"""consolidate (seed 002 §3.2, §4.5): remember's rules (memora.lifecycle.rules) across an agent's
memories. Each statement (stated through remember, or extracted by the LLM) is compared with its
nearest active statements: a duplicate or near-duplicate is folded into the older memory (richer
text kept, evidence counted; the newer one becomes `superseded` by it), a changed attribute
supersedes the older memory (its validity window closes: `store.lifecycle.supersede`).
Conversation turns of the local extractor are episodes, never merged, but a turn stating a
change of state ("Maya: I moved to Berlin!", first person being the speaker) supersedes the
turn or statement holding the older value, and a statement the turn it changes
(memora.lifecycle.changes). Nothing is deleted: every change is an audited status
change, restorable. A merged restatement keeps an open window: its fact still holds, in the
memory it was folded into.

Here rather than at ingest: the parse and the candidates' lookups cost nothing on the ingest
path (its throughput is unchanged), and a change is still found when its older value arrives
later (a backfill out of order): the older of the two is superseded.

Bounded and resumable: each run reads `job_batch_size` statements per agent after the cursor it
left in `job_cursors` (creation order), so statements stored later are compared in later runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memora.basics.models import utcnow
from memora.jobs.base import JobContext, JobResult
from memora.lifecycle import changes, rules
from memora.lifecycle.memory import candidates, statement
from memora.lifecycle.rules import Decision, Statement
from memora.store import evolution
from memora.store import lifecycle as store
from memora.webhooks import events as webhooks

JOB = "consolidate"
ACTOR = "job:consolidate"
NEIGHBOURS = 10


def _consolidatable(row: store.ActiveUnit | store.Neighbour) -> bool:
    meta = row.metadata or {}
    return bool(meta.get("source") == "remember" or meta.get("extractor") == "llm")


def _turn(row: store.ActiveUnit | store.Neighbour) -> bool:
    """A conversation turn of the local extractor (an episode: superseded, never merged)."""
    return not _consolidatable(row) and "speaker" in (row.metadata or {})


def _order(row: store.ActiveUnit) -> tuple[Any, ...]:
    return (row.event_date, row.created_at, str(row.id))


def run(ctx: JobContext) -> JobResult:
    s = ctx.settings
    t = rules.Thresholds(s.merge_similarity, s.supersede_similarity)
    result = JobResult(details={"merged": 0, "superseded": 0})
    with ctx.pool.connection() as conn:
        for key in evolution.agent_keys(conn, ctx.agent_key):
            with conn.transaction():
                store.lock_agent(conn, key)
                position = evolution.get_cursor(conn, JOB, key)
                batch = evolution.statements_after(conn, key, position, s.job_batch_size)
                for unit in batch:
                    result.examined += 1
                    changed = _consolidate(conn, key, unit, t)
                    if changed:
                        result.changed += 1
                        result.details[changed] += 1
                if batch:
                    last = batch[-1]
                    evolution.set_cursor(
                        conn, JOB, key, evolution.Position(last.created_at, last.id)
                    )
    return result


def _consolidate(conn: Any, key: str, unit: store.ActiveUnit, t: rules.Thresholds) -> str | None:
    """Apply the rules to one statement; the kind of change made, if any."""
    current = store.get_units(conn, key, [unit.id])
    if not current or current[0].status != "active":
        return None  # folded into another earlier in this run
    turn = _turn(unit)
    if turn and not changes.claims(unit.text):
        return None  # a turn that states no attribute changes nothing
    vector = np.asarray(unit.embedding.to_numpy(), dtype=np.float32)
    rows = [
        r
        for r in candidates(conn, key, unit.text, vector, NEIGHBOURS)
        if r.id != unit.id and (_consolidatable(r) or _turn(r))
    ]
    me = Statement(unit.text, frozenset(unit.entities), unit.id, 1.0, at=unit.event_date)
    peers = [statement(r) for r in rows if _consolidatable(r)]
    turns = [statement(r) for r in rows if _turn(r)]
    if turn:  # an episode: only a change of state
        verdict = rules.superseded(me, peers + turns, t)
    else:
        verdict = rules.decide(me, peers, t)
        if verdict.decision is Decision.ADD:
            verdict = rules.superseded(me, turns, t) or verdict
    if verdict is None or verdict.decision is Decision.ADD:
        return None
    other = next(r for r in rows if r.id == verdict.target)
    older, newer = sorted([unit, other], key=_order)
    now = utcnow()
    if verdict.decision is Decision.SUPERSEDE:
        # the older fact held until the change the newer one dates, else until it was said
        dated = verdict.effective_at if newer.id == unit.id else None
        change = store.Supersession(
            older.id, newer.id, older.text, newer.text, verdict.reason, "rules",
            until=dated or newer.event_date, effective_at=dated,
        )  # fmt: skip
        if not store.supersede(conn, key, change, ACTOR, at=now):
            return None
        webhooks.memory_superseded(conn, key, [older.id], newer.id, verdict.reason)
        return "superseded"
    kept = rules.richer(older.text, newer.text)
    rewritten = kept != older.text
    store.merge_into(
        conn, older.id, text=kept,
        vector=np.asarray(newer.embedding.to_numpy(), dtype=np.float32) if rewritten else None,
        metadata=rules.merge_metadata(older.metadata or {}, newer.metadata or {}),
        importance=float(newer.importance), category=newer.category, evidence=1,
    )  # fmt: skip
    store.set_status(
        conn, key, [newer.id], "superseded", reason=f"merged: {verdict.reason}", at=now,
        from_statuses=("active",), superseded_by=older.id,
    )  # fmt: skip
    store.record(conn, key, [older.id], "merged", ACTOR, reason=verdict.reason,
                 related_id=newer.id, details={"statement": newer.text})  # fmt: skip
    store.record(conn, key, [newer.id], "superseded", ACTOR, reason="merged",
                 related_id=older.id, details={"decided_by": "rules", "old_text": newer.text,
                                               "new_text": kept})  # fmt: skip
    webhooks.memory_superseded(conn, key, [newer.id], older.id, f"merged: {verdict.reason}")
    return "merged"
