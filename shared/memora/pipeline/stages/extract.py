"""extract: the messages an operation claims become facts (local or LLM extractor; the
verbatim one when the operation says its items are facts already: seeds, dialogue), each with
an importance (the LLM's, else memora.lifecycle's heuristic) and a category. Facts below
the importance floor, and sensitive ones nobody asked to remember, are not stored
(memora.extraction.policy; counted as `facts_dropped_*`). Messages marked `remember: false`
(a temporary chat) are not extracted at all.

Every ingest, append and edit operation claims the messages it extracts
(`conversation_messages.extracted_by`): a whole post claims all of its document's, an append
the ones it added, an edit its message. The write replaces, in one transaction, the units of
the messages still claimed, each unit recording the message it came from and carrying the
message's ordinal as its `item_index`; units of messages another operation claimed meanwhile
(a re-post took over) are left to it. An append's extractor also sees the messages just before
its own, as context (`extraction_context_messages`)."""

from __future__ import annotations

from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from psycopg import Connection

from memora.basics.tenancy import client_agent_id
from memora.extraction import policy
from memora.extraction.base import Extractor, Fact, SourceItem
from memora.extraction.local import LocalExtractor
from memora.extraction.policy import guess_category
from memora.extraction.verbatim import VerbatimExtractor
from memora.lifecycle.scores import heuristic_importance
from memora.nlp.language import parsing_ahead
from memora.pipeline.context import Job, StageContext, Writer
from memora.store import documents, entities, messages, units

VERBATIM: Extractor = VerbatimExtractor()


def _with_importance(facts: list[Fact]) -> list[Fact]:
    """The LLM's importance and category when it gave them, else the heuristics'."""
    for fact in facts:
        if fact.importance is None:
            fact.importance = heuristic_importance(
                fact.text, len(fact.mentions) if fact.mentions is not None else None
            )
        if fact.category is None:
            fact.category = guess_category(fact.text)
    return facts


def _screen(
    ctx: StageContext, extractor: Extractor, items: list[SourceItem], facts: list[Fact]
) -> policy.Screened:
    """What extraction keeps: the importance floor and the sensitive categories (docs/llm.md);
    the verbatim extractor's items are kept as written."""
    if extractor is VERBATIM:
        return policy.Screened(facts, Counter())
    return policy.screen(
        facts,
        importance_minimum=ctx.settings.importance_floor(extractor.name),
        sensitive=ctx.settings.sensitive_categories,
        explicit_items={i.index for i in items if policy.asks_to_remember(i.content)},
        confidence_minimum=ctx.settings.extraction_confidence if extractor.name == "llm" else 0,
    )


def _source_item(message: dict[str, Any], raw: dict[str, Any]) -> SourceItem:
    return SourceItem(
        index=message["ordinal"] if "ordinal" in message else message["position"],
        content=message["text"],
        context=raw.get("context"),
        event_date=message["occurred_at"],
        speaker=message["speaker"],
        metadata=raw.get("metadata") or {},
    )


def parse_ahead(
    ctx: StageContext, conn: Connection[Any], jobs: list[Job]
) -> AbstractContextManager[None]:
    """A stage batch's messages parsed by the local extractor in one pass, before each
    operation's `prepare` takes its own (memora.pipeline.batch): spaCy costs less a text so."""
    local = ctx.settings.auto_extraction and isinstance(ctx.extractor, LocalExtractor)
    if len(jobs) < 2 or not local:
        return nullcontext()
    rows = messages.claimed_by(conn, [(j.document["id"], j.operation.id) for j in jobs])
    items = [SourceItem(0, r["text"], None, r["occurred_at"], r["speaker"], {}) for r in rows]
    return parsing_ahead(LocalExtractor.texts(items))


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    doc = job.document
    # a message marked `remember: false` (a temporary chat) reaches no extractor, not even
    # as context; its units, if an earlier version had any, are replaced by none
    claimed = messages.claimed(conn, doc["id"], job.operation.id)
    window = ctx.settings.extraction_context_messages
    before = messages.preceding(conn, doc["id"], claimed[0]["position"], window) if claimed else []
    claimed = [m for m in claimed if m["remember"]]
    before = [m for m in before if m["remember"]]
    # context and metadata: what a message row does not hold
    extras = documents.item_extras(conn, doc["id"], [m["message_id"] for m in before + claimed])
    items = [_source_item(m, extras.get(m["message_id"], {})) for m in claimed]
    preceding = [_source_item(m, extras.get(m["message_id"], {})) for m in before]
    # The extractor sees the agent id as its client named it, not the stored key.
    extractor = VERBATIM if job.operation.payload.get("verbatim", False) else ctx.extractor
    found = (
        _with_importance(extractor.extract(client_agent_id(job.agent_key), items, preceding))
        if extractor is VERBATIM or ctx.settings.auto_extraction
        else []  # messages kept and indexed, no memory made of them (MEMORA_AUTO_EXTRACTION)
    )
    screened = _screen(ctx, extractor, items, found)
    facts = screened.kept
    pk_by_ordinal = {item.index: m["id"] for item, m in zip(items, claimed, strict=True)}

    def write(c: Connection[Any]) -> dict[str, int]:
        kept = messages.still_claimed(c, list(pk_by_ordinal.values()), job.operation.id)
        replaced = units.delete_claimed(c, doc["id"], job.operation.id)
        mine = [f for f in facts if pk_by_ordinal.get(f.item_index) in kept]
        ids = units.insert_facts(c, job.agent_key, doc["id"], mine)
        messages.add_sources(
            c, [(u, pk_by_ordinal[f.item_index]) for u, f in zip(ids, mine, strict=True)]
        )
        if replaced:
            entities.delete_orphans(c, job.agent_key)
        dropped = {f"facts_dropped_{why}": n for why, n in screened.dropped.items()}
        return {"units": len(mine), "units_replaced": replaced} | dropped

    return write
