"""index_messages: chunk, embed and index the messages that no chunk covers (seed 002 §7.4).

A chunk's vector (MEMORA_CONVERSATION_CHUNK_VECTORS): "units", the default, is made of the
vectors of the units extracted from its messages and from the message before (the embed stage
runs first), so each message is embedded once; only chunks without such units (small talk the
extractor dropped, windows of a long message) embed their text. "embed" embeds every chunk's
text. A rebuild (possibly for another model: the units keep their vectors) always embeds.

Ingest, append and repair operations index their document's uncovered messages, except those
another operation claims that has yet to index them (coalesced appends run side by side: a
message whose units are not made yet would have its chunk's text embedded); an edit or a delete
of one message indexes the few messages whose chunks it invalidated (operation payload
`message_pks`); a `reindex` operation rebuilds the agent's whole index into the next
generation, batch by batch, while searches read the live one, then switches in one update.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.stages import OperationKind
from memora.nlp.chunking import Chunk, ChunkingConfig, Message, Run, chunk_run
from memora.pipeline.context import Deferred, Job, Prepared, StageContext, Writer
from memora.store import chunks

Planned = list[tuple[UUID, Chunk, np.ndarray]]


def runs(rows: Sequence[dict[str, Any]]) -> list[tuple[UUID, Run]]:
    """Rows (in conversation order) cut into runs of messages adjacent in their conversation."""
    out: list[tuple[UUID, list[dict[str, Any]]]] = []
    for row in rows:
        if out and out[-1][1][-1]["id"] == row["prev_id"]:
            out[-1][1].append(row)
        else:
            out.append((row["document_pk"], [row]))
    return [
        (doc, Run([Message.from_row(r) for r in group], group[0]["prev_text"], group[0]["title"]))
        for doc, group in out
    ]


@dataclass(frozen=True)
class ChunkPlan:
    """The chunks to write, each with its vector when it could be derived from its messages'
    units (None: its text still has to be embedded)."""

    chunks: list[tuple[UUID, Chunk]]
    derived: list[np.ndarray | None]

    @property
    def texts(self) -> list[str]:
        return [c.text for (_, c), v in zip(self.chunks, self.derived, strict=True) if v is None]

    def complete(self, embedded: np.ndarray) -> Planned:
        """Every chunk with its vector, `embedded` holding those of `texts` in order."""
        rest = iter(embedded)
        return [
            (doc, c, v if v is not None else next(rest))
            for (doc, c), v in zip(self.chunks, self.derived, strict=True)
        ]


def _mean(vectors: Sequence[np.ndarray | None]) -> np.ndarray | None:
    """The normalised mean; None when there is no vector or one is missing (not embedded yet)."""
    present = [v for v in vectors if v is not None]
    if not present or len(present) < len(vectors):
        return None
    mean = np.mean(np.stack(present), axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None


def unit_vector(
    chunk: Chunk,
    previous: UUID | None,
    vectors: Mapping[UUID, Sequence[np.ndarray | None]],
    context_weight: float,
) -> np.ndarray | None:
    """The chunk's vector from units: the normalised mean of the vectors of the units extracted
    from its messages, plus `context_weight` times that of the message before (the chunk
    text's preceding context); None when its messages have no units (small talk the extractor
    dropped) or one is not embedded yet: its text is embedded then."""
    own = _mean([v for pk in chunk.covers for v in vectors.get(pk, [])])
    if own is None:
        return None
    before = _mean(vectors.get(previous, [])) if previous and context_weight else None
    return own if before is None else _mean([own + context_weight * before])


def plan(
    ctx: StageContext, conn: Connection[Any], rows: Sequence[dict[str, Any]], *, derive: bool
) -> ChunkPlan:
    """The chunks of the rows; with `derive`, a chunk that holds its messages whole (not one
    window of a long message) takes its vector from units (one embedding pass per message),
    the others are left to embed."""
    cfg = ChunkingConfig.from_settings(ctx.settings)
    waiting = {r["id"] for r in rows if r.get("waiting")}
    planned = [(doc, c) for doc, run in runs(rows) for c in _ready(chunk_run(run, cfg), waiting)]
    derived: list[np.ndarray | None] = [None] * len(planned)
    if derive and planned:
        weight = ctx.settings.conversation_chunk_context_weight if cfg.include_preceding else 0.0
        before = {r["id"]: r["prev_id"] for r in rows}
        wanted = {pk for _, c in planned for pk in c.covers} | {
            p for p in before.values() if p is not None
        }
        vectors = chunks.unit_vectors(conn, list(wanted))
        windowed = {c.owner for _, c in planned if c.index > 0}
        derived = [
            None if c.owner in windowed else unit_vector(c, before[c.owner], vectors, weight)
            for _, c in planned
        ]
    return ChunkPlan(planned, derived)


def _ready(run_chunks: list[Chunk], waiting: set[UUID]) -> list[Chunk]:
    """A run's chunks up to the first that holds a waiting message: that one and the rest are
    left to the operation that claims it, whose units will be embedded by then (the same
    chunks: the run is cut again from the same first message)."""
    for k, chunk in enumerate(run_chunks):
        if waiting.intersection(chunk.covers):
            return run_chunks[:k]
    return run_chunks


def embedded(ctx: StageContext, chunk_plan: ChunkPlan) -> Planned:
    return chunk_plan.complete(ctx.embedder.embed(chunk_plan.texts))


def write_planned(conn: Connection[Any], agent_key: str, generation: int, planned: Planned) -> int:
    """Insert the chunks still current: their messages unchanged since they were read (an edit
    in between has its own operation) and not indexed meanwhile by another operation."""
    fresh = chunks.keep_current(conn, generation, [c for _, c, _ in planned])
    return chunks.insert(conn, agent_key, generation, [p for p in planned if p[1] in fresh])


def _model(ctx: StageContext) -> tuple[str, int]:
    return ctx.settings.embedding_model, ctx.settings.embedding_dim


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Prepared:
    if not ctx.settings.conversation_index:  # queued before the index was turned off
        return lambda c: {"messages_indexed": 0, "chunks_written": 0}
    if job.operation.kind is OperationKind.REINDEX:
        return _rebuild(ctx, conn, job)
    model, dim = _model(ctx)
    roles = ctx.settings.conversation_roles
    generation = chunks.state(conn, job.agent_key, model, dim)["generation"]
    scope = job.message_pks
    rows = chunks.pending(
        conn,
        job.agent_key,
        generation,
        roles,
        document_pk=None if scope is not None else job.document["id"],
        message_pks=scope,
        exclude=ctx.settings.conversation_exclude_patterns,
        operation_id=job.operation.id if scope is None else None,
    )
    chunk_plan = plan(ctx, conn, rows, derive=ctx.settings.conversation_chunk_vectors == "units")

    def finish(vectors: np.ndarray) -> Writer:
        planned = chunk_plan.complete(vectors)

        def write(c: Connection[Any]) -> dict[str, int]:
            live = chunks.state(c, job.agent_key, model, dim, lock="share")["generation"]
            written = write_planned(c, job.agent_key, live, planned) if live == generation else 0
            chunks.synced(c, job.agent_key)
            return {
                "messages_indexed": len({pk for _, c in chunk_plan.chunks for pk in c.covers}),
                "chunks_written": written,
                "chunks_embedded": len(vectors),
            }

        return write

    return Deferred(chunk_plan.texts, finish)


def _rebuild(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    """Build the next generation in committed batches (invisible to search until the switch)."""
    model, dim = _model(ctx)
    roles = ctx.settings.conversation_roles
    batch = ctx.settings.conversation_reindex_batch
    chunks.state(conn, job.agent_key, model, dim)
    generation = chunks.start_build(conn, job.agent_key, model)
    conn.commit()
    built = 0
    exclude = ctx.settings.conversation_exclude_patterns
    while rows := chunks.pending(
        conn, job.agent_key, generation, roles, limit=batch, exclude=exclude
    ):
        with conn.transaction():
            built_plan = plan(ctx, conn, rows, derive=False)
            written = write_planned(conn, job.agent_key, generation, embedded(ctx, built_plan))
        if not written:  # what is left changes under us: the final pass takes it, locked
            break
        built += written

    def write(c: Connection[Any]) -> dict[str, int]:
        chunks.state(c, job.agent_key, model, dim, lock="update")
        # Messages indexed into the old generation while this one was being built.
        late = chunks.pending(c, job.agent_key, generation, roles, exclude=exclude)
        late_plan = embedded(ctx, plan(ctx, c, late, derive=False))
        written = built + write_planned(c, job.agent_key, generation, late_plan)
        retired = chunks.switch(c, job.agent_key, generation, model, dim)
        return {"chunks_written": written, "chunks_retired": retired, "generation": generation}

    return write
