"""What remember and consolidation share: the statements a new one is compared with, the LLM's
conflict check, and the entities and links a new or rewritten memory gets. The use cases that
run them (remember, edit, forget, restore, link, the memory's view) are in memora.usecases
(`remember`, `memories`)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal
from uuid import UUID

import numpy as np
from psycopg import Connection
from pydantic import BaseModel, Field

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.entities import resolution as entities
from memora.extraction.base import Mention
from memora.lifecycle import changes
from memora.lifecycle.rules import Decision, Statement, Thresholds, Verdict
from memora.nlp.llm import LLMClient
from memora.store import entities as entity_store
from memora.store import lifecycle as store
from memora.store import links
from memora.store.units import Unresolved

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


def index(
    conn: Connection[Any],
    settings: Settings,
    key: str,
    unit_id: UUID,
    found: list[Mention],
    at: Any,
    text: str = "",
) -> None:
    """Entities and links of a new or rewritten unit (`text`: what it says, which entity
    resolution reads for context), as the pipeline's stages make them."""
    entity_store.unlink_units(conn, [unit_id])
    entities.resolve(
        conn,
        key,
        [entities.UnitMentions(unit_id, at, found, text)],
        entities.ResolutionWeights.from_settings(settings),
    )
    links.build_links(conn, [unit_id], links.LinkSettings.from_settings(settings))


def decider(by: Literal["rules", "llm"], llm: LLMClient | None) -> str:
    """Who decided, as the audit trail names it: "rules", or "llm:<model>"."""
    if by == "llm" and llm is not None:
        return f"llm:{llm.model_for('background')}"
    return by


def ask_llm(llm: LLMClient | None, text: str, candidates: list[Statement]) -> Verdict | None:
    """The LLM's verdict on the borderline memories (None without an LLM or candidates;
    a failed call falls back to the rules)."""
    if llm is None or not candidates:
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
        answer = llm.complete_json("background", messages, _LLMVerdict)
    except Exception as exc:  # the rules' verdict stands
        log.warning("conflict check by LLM failed; rules decide", extra={"error": str(exc)})
        return None
    decision = Decision(answer.decision)
    if decision is Decision.ADD:
        return Verdict(decision, None, answer.reason or "the LLM found no same fact")
    if answer.memory is None or not 1 <= answer.memory <= len(candidates):
        return None
    return Verdict(decision, candidates[answer.memory - 1].id, answer.reason or "LLM")
