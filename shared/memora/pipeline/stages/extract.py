"""extract: the document's raw items become facts (local or LLM extractor; the verbatim one
when the operation says its items are facts already: seeds, dialogue), each with an importance
(the LLM's, else memora.lifecycle's heuristic); the document's previous units are replaced by
the new ones in one transaction, each recording the message it came from. An edit of one
message (operation kind message_edit) extracts that message alone and replaces only the units
whose one source it is; every other unit stays as it is."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import Connection

from memora.basics.tenancy import client_agent_id
from memora.extraction.base import Extractor, Fact, SourceItem
from memora.extraction.verbatim import VerbatimExtractor
from memora.lifecycle.scores import heuristic_importance
from memora.pipeline.context import Job, StageContext, Writer
from memora.store import entities, messages, units

VERBATIM: Extractor = VerbatimExtractor()


def _source_item(index: int, raw: dict[str, Any], default_time: datetime) -> SourceItem:
    return SourceItem(
        index=index,
        content=raw["content"],
        context=raw.get("context"),
        event_date=datetime.fromisoformat(raw["event_date"])
        if raw.get("event_date")
        else default_time,
        speaker=raw.get("speaker"),
        metadata=raw.get("metadata") or {},
    )


def _with_importance(facts: list[Fact]) -> list[Fact]:
    """The LLM's importance when it gave one, else the heuristic's."""
    for fact in facts:
        if fact.importance is None:
            fact.importance = heuristic_importance(
                fact.text, len(fact.mentions) if fact.mentions is not None else None
            )
    return facts


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    if job.edited_message is not None:
        return _prepare_edit(ctx, conn, job)
    doc = job.document
    items = [_source_item(i, raw, doc["created_at"]) for i, raw in enumerate(doc["items"])]
    # The extractor sees the agent id as its client named it, not the stored key.
    verbatim = job.operation.payload.get("verbatim", False)
    extractor = VERBATIM if verbatim else ctx.extractor
    facts = _with_importance(extractor.extract(client_agent_id(job.agent_key), items))

    def write(c: Connection[Any]) -> dict[str, int]:
        replaced = units.delete_for_document(c, doc["id"])
        ids = units.insert_facts(c, job.agent_key, doc["id"], facts)
        by_position = messages.pks_by_position(c, doc["id"])
        messages.add_sources(
            c,
            [(u, by_position[f.item_index]) for u, f in zip(ids, facts, strict=True)
             if f.item_index in by_position],
        )  # fmt: skip
        if replaced:
            entities.delete_orphans(c, job.agent_key)
        return {"units": len(facts), "units_replaced": replaced}

    return write


def _prepare_edit(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    message_pk = job.edited_message
    assert message_pk is not None
    message = messages.get(conn, message_pk)
    if message is None:  # deleted since: nothing to extract
        return lambda c: {"units": 0, "units_replaced": 0}
    raw = {
        "content": message["text"],
        "speaker": message["speaker"],
        "event_date": message["occurred_at"].isoformat(),
        **_item_extras(job.document, message["message_id"]),
    }
    item = _source_item(message["position"], raw, message["occurred_at"])
    facts = _with_importance(ctx.extractor.extract(client_agent_id(job.agent_key), [item]))

    def write(c: Connection[Any]) -> dict[str, int]:
        if messages.get(c, message_pk) is None:
            return {"units": 0, "units_replaced": 0}
        replaced = messages.purge_units_only_from(c, message_pk)
        ids = units.insert_facts(c, job.agent_key, job.document["id"], facts)
        messages.add_sources(c, [(u, message_pk) for u in ids])
        if replaced:
            entities.delete_orphans(c, job.agent_key)
        return {"units": len(facts), "units_replaced": replaced}

    return write


def _item_extras(document: dict[str, Any], message_id: str) -> dict[str, Any]:
    """The item's context and metadata (what the message row does not hold)."""
    for position, raw in enumerate(document.get("items") or []):
        if raw.get("message_id", str(position)) == message_id:
            return {"context": raw.get("context"), "metadata": raw.get("metadata") or {}}
    return {}
