"""index_messages: chunk, embed and index the messages that no chunk covers (seed 002 §7.4).

Ingest and repair operations index their document's uncovered messages; an edit or a delete
of one message indexes the few messages whose chunks it invalidated (operation payload
`message_pks`); a `reindex` operation rebuilds the agent's whole index into the next
generation, batch by batch, while searches read the live one, then switches in one update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics.stages import OperationKind
from memora.nlp.chunking import Chunk, ChunkingConfig, Message, Run, chunk_run
from memora.pipeline.context import Job, StageContext, Writer
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


def plan(ctx: StageContext, rows: Sequence[dict[str, Any]]) -> Planned:
    cfg = ChunkingConfig.from_settings(ctx.settings)
    planned = [(doc, c) for doc, run in runs(rows) for c in chunk_run(run, cfg)]
    if not planned:
        return []
    vectors = ctx.embedder.embed([c.text for _, c in planned])
    return [(doc, c, v) for (doc, c), v in zip(planned, vectors, strict=True)]


def write_planned(conn: Connection[Any], agent_key: str, generation: int, planned: Planned) -> int:
    """Insert the chunks still current: their messages unchanged since they were read (an edit
    in between has its own operation) and not indexed meanwhile by another operation."""
    fresh = chunks.keep_current(conn, generation, [c for _, c, _ in planned])
    return chunks.insert(conn, agent_key, generation, [p for p in planned if p[1] in fresh])


def _model(ctx: StageContext) -> tuple[str, int]:
    return ctx.settings.embedding_model, ctx.settings.embedding_dim


def prepare(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
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
    )
    planned = plan(ctx, rows)

    def write(c: Connection[Any]) -> dict[str, int]:
        live = chunks.state(c, job.agent_key, model, dim, lock="share")["generation"]
        written = write_planned(c, job.agent_key, live, planned) if live == generation else 0
        chunks.synced(c, job.agent_key)
        return {"messages_indexed": len(rows), "chunks_written": written}

    return write


def _rebuild(ctx: StageContext, conn: Connection[Any], job: Job) -> Writer:
    """Build the next generation in committed batches (invisible to search until the switch)."""
    model, dim = _model(ctx)
    roles = ctx.settings.conversation_roles
    batch = ctx.settings.conversation_reindex_batch
    chunks.state(conn, job.agent_key, model, dim)
    generation = chunks.start_build(conn, job.agent_key, model)
    conn.commit()
    built = 0
    while rows := chunks.pending(conn, job.agent_key, generation, roles, limit=batch):
        with conn.transaction():
            written = write_planned(conn, job.agent_key, generation, plan(ctx, rows))
        if not written:  # what is left changes under us: the final pass takes it, locked
            break
        built += written

    def write(c: Connection[Any]) -> dict[str, int]:
        chunks.state(c, job.agent_key, model, dim, lock="update")
        # Messages indexed into the old generation while this one was being built.
        late = chunks.pending(c, job.agent_key, generation, roles)
        written = built + write_planned(c, job.agent_key, generation, plan(ctx, late))
        retired = chunks.switch(c, job.agent_key, generation, model, dim)
        return {"chunks_written": written, "chunks_retired": retired, "generation": generation}

    return write
