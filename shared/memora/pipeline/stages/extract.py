"""extract: the document's raw items become facts (local or LLM extractor; the verbatim one
when the operation says its items are facts already: seeds, dialogue); the document's
previous units are replaced by the new ones in one transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import Connection

from memora.extraction.base import Extractor, SourceItem
from memora.extraction.verbatim import VerbatimExtractor
from memora.pipeline.context import Job, StageContext, Writer
from memora.store import entities, units
from memora.tenancy import client_agent_id

VERBATIM: Extractor = VerbatimExtractor()


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    doc = job.document
    default_time: datetime = doc["created_at"]
    items = [
        SourceItem(
            index=i,
            content=raw["content"],
            context=raw.get("context"),
            event_date=datetime.fromisoformat(raw["event_date"])
            if raw.get("event_date")
            else default_time,
            speaker=raw.get("speaker"),
            metadata=raw.get("metadata") or {},
        )
        for i, raw in enumerate(doc["items"])
    ]
    # The extractor sees the agent id as its client named it, not the stored key.
    verbatim = (job.operation.get("payload") or {}).get("verbatim", False)
    extractor = VERBATIM if verbatim else ctx.extractor
    facts = extractor.extract(client_agent_id(job.agent_key), items)

    def write(c: Connection[Any]) -> dict[str, int]:
        replaced = units.delete_for_document(c, doc["id"])
        units.insert_facts(c, job.agent_key, doc["id"], facts)
        if replaced:
            entities.delete_orphans(c, job.agent_key)
        return {"units": len(facts), "units_replaced": replaced}

    return write
