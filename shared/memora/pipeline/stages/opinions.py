"""opinions: stores the opinions a think formed (memora.think.opinions), each an immutable unit
embedded, entity-resolved and linked like any other memory; a revisited opinion becomes a new
version that supersedes the current head of its history."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.errors import PermanentStageError
from memora.entities import resolution as entities
from memora.extraction.base import Fact, Mention
from memora.pipeline.context import Job, StageContext, Writer
from memora.store import links, units
from memora.think.opinions import OpinionDraft, updated_confidence


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    op = job.operation
    payload = op.payload
    drafts, formed_at = _drafts(payload)
    agent_id = job.agent_key
    vectors = ctx.embedder.embed([d.text() for d in drafts])
    found = entities.find_mentions(
        [units.Unresolved(uuid.uuid4(), d.text(), formed_at, None) for d in drafts]
    )
    mentions: list[list[Mention]] = [list(u.mentions) for u in found]
    s = ctx.settings
    weights = entities.ResolutionWeights.from_settings(s)
    link_cfg = links.LinkSettings.from_settings(s)
    base_meta = {
        "query": payload.get("query"),
        "personality": payload.get("personality"),
        "based_on": payload.get("based_on", []),
        "operation_id": str(op.id),
    }

    def write(c: Connection[Any]) -> dict[str, int]:
        units.lock_opinions(c, agent_id)
        new_ids: list[UUID] = []
        revised = 0
        for draft, vector, found_mentions in zip(drafts, vectors, mentions, strict=True):
            previous = _previous(
                c, agent_id, draft.previous_id, vector, s.opinion_same_topic_similarity
            )
            fact = _opinion_fact(draft, previous, formed_at, base_meta, found_mentions)
            [unit_id] = units.insert_facts(c, agent_id, None, [fact])
            units.set_opinion_vector(c, unit_id, vector, previous.id if previous else None)
            new_ids.append(unit_id)
            revised += previous is not None
        resolved = entities.resolve(
            c,
            agent_id,
            [
                entities.UnitMentions(i, formed_at, m)
                for i, m in zip(new_ids, mentions, strict=True)
            ],
            weights,
        )
        counts = {
            "opinions_stored": len(new_ids),
            "opinions_revised": revised,
            "entity_mentions": len(resolved.links),
        }
        counts |= {f"links_{k}": v for k, v in links.build_links(c, new_ids, link_cfg).items()}
        return counts

    return write


def _drafts(payload: dict[str, Any]) -> tuple[list[OpinionDraft], datetime]:
    """The operation's opinions and when they were formed; a payload that cannot be read
    fails the stage for good."""
    try:
        drafts = [OpinionDraft.model_validate(d) for d in payload.get("opinions", [])]
        formed_at = datetime.fromisoformat(payload["formed_at"])
    except (ValueError, KeyError) as exc:
        raise PermanentStageError(f"invalid opinions payload: {exc}") from exc
    return drafts, formed_at


def _opinion_fact(
    draft: OpinionDraft,
    previous: units.OpinionHead | None,
    formed_at: datetime,
    base_meta: dict[str, Any],
    mentions: list[Mention],
) -> Fact:
    """The opinion as a unit to store: a new one, or a version of the `previous` one's history
    (a restatement when the draft did not name it), its confidence updated accordingly."""
    stance: str = draft.stance
    if previous is not None and draft.previous_id is None:
        stance = "restates"
    confidence = updated_confidence(
        stance, draft.confidence, previous.confidence_score if previous else None
    )
    metadata = base_meta | {
        "statement": draft.statement,
        "reasons": draft.reasons,
        "stance": stance if previous else "new",
        "proposed_confidence": draft.confidence,
    }
    return Fact(
        item_index=0,
        seq=0,
        text=draft.text(),
        fact_type="opinion",
        event_date=formed_at,
        mentioned_at=formed_at,
        confidence=confidence,
        metadata=metadata,
        mentions=mentions,
    )


def _previous(
    conn: Connection[Any], agent_id: str, named: UUID | None, vector: np.ndarray, threshold: float
) -> units.OpinionHead | None:
    """The current head of the history this opinion continues, if any: the named opinion's
    (unless it is unknown), else the most similar current opinion above the threshold."""
    if named is not None:
        head = units.opinion_head(conn, agent_id, named)
        if head is not None:
            return head
    row = units.nearest_current_opinion(conn, agent_id, vector)
    return row if row is not None and row.similarity >= threshold else None
