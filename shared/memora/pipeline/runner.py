"""Runs one pipeline stage for one operation: load, compute, then write under a guard.

Every stage is idempotent. It locks the operation row before writing and checks that the stage
is not already done, so a redelivered or duplicated task writes nothing twice; the write and
the stage's "done" mark commit together. The caller enqueues the returned next stage only
after that commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from memora import entities, links
from memora.config import Settings
from memora.embedding import Embedder, check_dimension, get_embedder
from memora.extraction.base import Extractor, Fact, Mention, SourceItem
from memora.models import utcnow
from memora.pipeline.stages import Stage, next_stage
from memora.store import documents, operations
from memora.tenancy import SEPARATOR

log = logging.getLogger("memora.pipeline")

Handler = Callable[[Connection[Any], dict[str, Any], dict[str, Any]], "Writer"]
Writer = Callable[[Connection[Any]], dict[str, int]]


class Pipeline:
    """Per-process pipeline state: settings, a pool, and lazily loaded models."""

    def __init__(self, settings: Settings, pool: ConnectionPool) -> None:
        self.settings = settings
        self.pool = pool

    @cached_property
    def embedder(self) -> Embedder:
        s = self.settings
        embedder = get_embedder(
            s.embedding_model,
            s.torch_threads,
            s.embedding_batch_size,
            s.embedding_backend,
            s.model_cache_dir,
        )
        check_dimension(embedder, s.embedding_dim)
        return embedder

    @cached_property
    def extractor(self) -> Extractor:
        if self.settings.resolved_extractor == "llm":
            from memora.extraction.llm import LLMExtractor
            from memora.llm import LLMClient

            return LLMExtractor(LLMClient.from_settings(self.settings), self.settings)
        from memora.extraction.local import LocalExtractor

        return LocalExtractor()

    def preload(self, names: str) -> None:
        """Load models now (at worker start) so the first task is not slowed by it."""
        wanted = {n.strip() for n in names.split(",") if n.strip()}
        if "embedder" in wanted:
            self.embedder.embed(["warm-up"])
        if "nlp" in wanted:
            from memora.nlp import load_nlp
            from memora.temporal import resolve_expression

            list(load_nlp().pipe(["Alice met Bob in Paris yesterday."]))
            resolve_expression("yesterday", utcnow())

    # ------------------------------------------------------------------ driver
    def run(self, stage: Stage, operation_id: UUID) -> Stage | None:
        """Run `stage`; return the stage to enqueue next (None when finished or stale)."""
        with self.pool.connection() as conn:
            op = operations.get_operation(conn, operation_id)
            if op is None or op["status"] in operations.TERMINAL:
                return None
            if op["stages"].get(stage.value, {}).get("status") == "done":
                return next_stage(stage)
            doc: dict[str, Any] = {}
            if op["kind"] == "ingest":
                pk = op["document_pk"]
                with_items = stage is Stage.EXTRACT
                found = documents.get_document(conn, pk, with_items=with_items) if pk else None
                if found is None or found["current_operation_id"] != operation_id:
                    operations.mark_superseded(conn, operation_id)
                    conn.commit()
                    return None
                doc = found
            operations.stage_started(conn, operation_id, stage)
            conn.commit()

            writer = self._handlers()[stage](conn, op, doc)
            conn.commit()  # end the read transaction before taking the write lock

            with conn.transaction():
                locked = operations.get_operation(conn, operation_id, lock=True)
                if locked is None or locked["status"] in operations.TERMINAL:
                    return None
                if locked["stages"].get(stage.value, {}).get("status") == "done":
                    return next_stage(stage)
                counts = writer(conn)
                following = next_stage(stage) if op["kind"] == "ingest" else None
                operations.stage_done(conn, operation_id, stage, following, counts)
            log.info(
                "stage done", extra={"stage": stage.value, "operation": str(operation_id), **counts}
            )
            return following

    def record_failure(self, stage: Stage, operation_id: UUID, error: str, *, final: bool) -> None:
        with self.pool.connection() as conn:
            operations.stage_error(conn, operation_id, stage, error, final=final)

    def _handlers(self) -> dict[Stage, Handler]:
        return {
            Stage.EXTRACT: self._extract,
            Stage.EMBED: self._embed,
            Stage.ENTITIES: self._entities,
            Stage.LINKS: self._links,
            Stage.OPINIONS: self._opinions,
        }

    def _opinions(self, conn: Connection[Any], op: dict[str, Any], doc: dict[str, Any]) -> Writer:
        from memora import opinions  # the opinion network's own module (it uses insert_facts)

        return opinions.prepare(self, conn, op)

    # ------------------------------------------------------------------ stages
    def _extract(self, conn: Connection[Any], op: dict[str, Any], doc: dict[str, Any]) -> Writer:
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
        facts = self.extractor.extract(op["agent_id"].rpartition(SEPARATOR)[2], items)

        def write(c: Connection[Any]) -> dict[str, int]:
            replaced = c.execute(
                "DELETE FROM memory_units WHERE document_pk = %s", (doc["id"],)
            ).rowcount
            insert_facts(c, op["agent_id"], doc["id"], facts)
            if replaced:
                documents.delete_orphan_entities(c, op["agent_id"])
            return {"units": len(facts), "units_replaced": max(replaced, 0)}

        return write

    def _embed(self, conn: Connection[Any], op: dict[str, Any], doc: dict[str, Any]) -> Writer:
        rows = conn.execute(
            "SELECT id, text FROM memory_units WHERE document_pk = %s AND embedding IS NULL "
            "ORDER BY item_index, seq",
            (doc["id"],),
        ).fetchall()
        vectors = self.embedder.embed([r["text"] for r in rows])

        def write(c: Connection[Any]) -> dict[str, int]:
            with c.cursor() as cur:
                cur.executemany(
                    "UPDATE memory_units SET embedding = %s WHERE id = %s",
                    [(vec, r["id"]) for r, vec in zip(rows, vectors, strict=True)],
                )
            return {"embedded": len(rows)}

        return write

    def _entities(self, conn: Connection[Any], op: dict[str, Any], doc: dict[str, Any]) -> Writer:
        rows = conn.execute(
            "SELECT id, text, event_date, mentions FROM memory_units WHERE document_pk = %s "
            "ORDER BY item_index, seq",
            (doc["id"],),
        ).fetchall()
        units = unit_mentions(rows)
        gazetteer = entities.Gazetteer.load(
            conn, op["agent_id"], also=[m for u in units for m in u.mentions]
        )
        texts = {r["id"]: r["text"] for r in rows}
        for unit in units:
            unit.mentions = entities.merge_mentions(
                unit.mentions, gazetteer.find(texts[unit.unit_id])
            )
        s = self.settings
        weights = entities.ResolutionWeights(
            s.entity_name_weight,
            s.entity_cooccurrence_weight,
            s.entity_temporal_weight,
            s.entity_match_threshold,
        )

        def write(c: Connection[Any]) -> dict[str, int]:
            c.execute(
                "DELETE FROM unit_entities WHERE unit_id = ANY(%s)", ([u.unit_id for u in units],)
            )
            result = entities.resolve(c, op["agent_id"], units, weights)
            return {"entity_mentions": len(result.links), "entities_created": result.created}

        return write

    def _links(self, conn: Connection[Any], op: dict[str, Any], doc: dict[str, Any]) -> Writer:
        ids = [
            r["id"]
            for r in conn.execute(
                "SELECT id FROM memory_units WHERE document_pk = %s", (doc["id"],)
            )
        ]
        s = self.settings
        cfg = links.LinkSettings(
            s.temporal_window_hours,
            s.temporal_links_per_unit,
            s.semantic_link_threshold,
            s.semantic_links_per_unit,
            s.entity_links_per_entity,
        )

        def write(c: Connection[Any]) -> dict[str, int]:
            counts = links.build_links(c, ids, cfg)
            return {f"links_{k}": v for k, v in counts.items()}

        return write


def unit_mentions(rows: list[dict[str, Any]]) -> list[entities.UnitMentions]:
    """Mentions as the extractor recorded them, or from spaCy NER where it left none."""
    from memora.nlp import ENTITY_TYPES, load_nlp

    missing = [r for r in rows if r["mentions"] is None]
    ner: dict[UUID, list[Mention]] = {}
    if missing:
        nlp = load_nlp()
        for row, parsed in zip(missing, nlp.pipe(r["text"] for r in missing), strict=True):
            ner[row["id"]] = [
                Mention(e.text.strip(), ENTITY_TYPES[e.label_])
                for e in parsed.ents
                if e.label_ in ENTITY_TYPES
            ]
    return [
        entities.UnitMentions(
            r["id"],
            r["event_date"],
            ner[r["id"]]
            if r["id"] in ner
            else [Mention(m["name"], m["entity_type"]) for m in r["mentions"]],
        )
        for r in rows
    ]


def insert_facts(
    conn: Connection[Any], agent_id: str, document_pk: UUID | None, facts: list[Fact]
) -> list[UUID]:
    """Bulk insert with COPY; returns the new unit ids in order."""
    if not facts:
        return []
    ids = [
        r["id"]
        for r in conn.execute(
            "SELECT gen_random_uuid() AS id FROM generate_series(1, %s)", (len(facts),)
        ).fetchall()
    ]
    now = utcnow()
    columns = (
        "id, agent_id, document_pk, item_index, seq, text, context, fact_type, event_date, "
        "occurred_start, occurred_end, mentioned_at, confidence_score, mentions, relations, "
        "metadata, created_at"
    )
    with conn.cursor() as cur, cur.copy(f"COPY memory_units ({columns}) FROM STDIN") as copy:
        for unit_id, f in zip(ids, facts, strict=True):
            copy.write_row(
                (
                    unit_id,
                    agent_id,
                    document_pk,
                    f.item_index,
                    f.seq,
                    f.text,
                    f.context,
                    f.fact_type,
                    f.event_date,
                    f.occurred_start,
                    f.occurred_end,
                    f.mentioned_at,
                    f.confidence,
                    Jsonb([{"name": m.name, "entity_type": m.entity_type} for m in f.mentions])
                    if f.mentions is not None
                    else None,
                    Jsonb(
                        [
                            {
                                "target_item": r.target_item,
                                "target_seq": r.target_seq,
                                "relation": r.relation,
                            }
                            for r in f.relations
                        ]
                    )
                    if f.relations
                    else None,
                    Jsonb(f.metadata),
                    now,
                )
            )
    return ids
