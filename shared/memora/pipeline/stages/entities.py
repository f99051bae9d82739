"""entities: mentions (the extractor's, else spaCy NER, plus names the agent already knows)
resolved to the agent's canonical entities (memora.entities.resolution), then the relations
the units state between them recorded (memora.lifecycle.relating)."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from memora.entities import resolution as entities
from memora.lifecycle import relating
from memora.pipeline.context import Job, StageContext, Writer
from memora.store import entities as entity_store
from memora.store import units


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    rows = units.for_entities(conn, job.document["id"], job.operation.id)
    found = entities.find_mentions(rows)
    gazetteer = entities.Gazetteer.load(
        conn, job.agent_key, also=[m for u in found for m in u.mentions]
    )
    texts = {r.id: r.text for r in rows}
    stated = relating.read_units(rows) if ctx.settings.entity_relations else {}
    for unit in found:
        unit.mentions = entities.merge_mentions(unit.mentions, gazetteer.find(texts[unit.unit_id]))
        if unit.unit_id in stated:
            named = relating.mentions_of(stated[unit.unit_id])
            unit.mentions = entities.merge_mentions(unit.mentions, named)
    weights = entities.ResolutionWeights.from_settings(ctx.settings)

    def write(c: Connection[Any]) -> dict[str, int]:
        entity_store.unlink_units(c, [u.unit_id for u in found])
        result = entities.resolve(c, job.agent_key, found, weights)
        related = relating.record_units(c, job.agent_key, rows, stated)
        return {"entity_mentions": len(result.links), "entities_created": result.created} | related

    return write
