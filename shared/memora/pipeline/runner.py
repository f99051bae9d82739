"""The stage driver and the stage registry.

Every stage is a module of `memora.pipeline.stages` with one function, `prepare(ctx, conn,
job) -> write`: it computes outside any lock and returns the write step (or a `Deferred` one
that needs texts embedded first). The driver loads the job, marks the stage running, calls
`prepare`, then in one transaction locks the operation row, checks again that the stage is not
done, writes and marks it done; a redelivered or duplicated task therefore writes nothing
twice. The caller enqueues the returned next stage only after that commit.
`memora.pipeline.batch` runs one stage for many operations the same way, together.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg import Connection
from psycopg_pool import ConnectionPool

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES, OperationKind, Stage, next_stage
from memora.pipeline.context import Job, Prepared, StageContext, Writer
from memora.pipeline.handoff import TaskBackend, hand_off
from memora.pipeline.stages import embed, entities, extract, index_messages, links, opinions
from memora.store import append_operations, documents, evolution, generations, operations
from memora.webhooks import events as webhooks

log = logging.getLogger("memora.pipeline")

Prepare = Callable[[StageContext, Connection[Any], Job], Prepared]


@dataclass(frozen=True)
class Skip:
    """A stage with nothing to run for an operation; `following` is enqueued (when set)."""

    following: Stage | None


@dataclass(frozen=True)
class Written:
    """What `Pipeline.write` did in the caller's transaction: the stage to enqueue after the
    commit, and the counts the stage wrote (None: nothing, the stage was done already or the
    operation is over)."""

    following: Stage | None
    counts: dict[str, int] | None = None
    released: tuple[tuple[UUID, bool], ...] = ()  # operations held after this one: id, backfill
    evolve: UUID | None = None  # the evolve operation its end of conversation asked for

    def logged(self, stage: Stage, operation_id: UUID) -> Stage | None:
        """Logs the stage as done, once its transaction has committed; the next stage."""
        if self.counts is not None:
            log.info(
                "stage done",
                extra={"stage": stage.value, "operation": str(operation_id), **self.counts},
            )
        return self.following


REGISTRY: Mapping[Stage, Prepare] = {
    Stage.EXTRACT: extract.prepare,
    Stage.EMBED: embed.prepare,
    Stage.ENTITIES: entities.prepare,
    Stage.LINKS: links.prepare,
    Stage.OPINIONS: opinions.prepare,
    Stage.INDEX_MESSAGES: index_messages.prepare,
}


# Work a stage batch does for all its operations before their prepares (memora.pipeline.batch).
Ahead = Callable[[StageContext, Connection[Any], list[Job]], AbstractContextManager[None]]
AHEAD: Mapping[Stage, Ahead] = {Stage.EXTRACT: extract.parse_ahead}


# Operations that always belong to a document (its deletion supersedes them).
DOCUMENT_KINDS = frozenset({OperationKind.INGEST, OperationKind.APPEND, OperationKind.MESSAGE_EDIT})


def superseded(op: operations.Operation, document: dict[str, Any] | None) -> bool:
    """An operation on a document is overtaken by the document's deletion; an ingest by a
    later post of its document, and an append by a whole post after it (which claims its
    messages: `base`, the post the append was made on, is no longer current)."""
    if document is None:
        return True
    current = document["current_operation_id"]
    if op.kind is OperationKind.INGEST:
        return bool(current != op.id)
    if op.kind is OperationKind.APPEND:
        return str(current) != str(op.payload.get("base", op.id))
    return False


class Pipeline:
    """Per-process pipeline state: the stage context (settings, models), a pool and the task
    backend its committed webhook deliveries are handed to (None: the sweep sends them)."""

    def __init__(
        self, settings: Settings, pool: ConnectionPool[Any], *, backend: TaskBackend | None = None
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.backend = backend
        self.context = StageContext(settings)
        off = {
            Stage.INDEX_MESSAGES: settings.conversation_index,
            Stage.LINKS: settings.graph_memory,
        }
        self.skip = frozenset(stage for stage, on in off.items() if not on)  # turned off

    def run(self, stage: Stage, operation_id: UUID, prepare: Prepare | None = None) -> Stage | None:
        """Run `stage` (with `prepare`, for a stage whose work is above the pipeline: the
        worker's jobs); return the stage to enqueue next (None when finished or stale). Once
        more at once when a `memora reembed` switch refused its vectors (embedded again with
        the new generation's model)."""
        try:
            return self._run(stage, operation_id, prepare)
        except Exception as exc:
            if not generations.changed(exc):
                raise
            log.info("stage %s of %s: the embedding generation changed, run again", stage.value,
                     operation_id)  # fmt: skip
            self.context.follower.expire()
            return self._run(stage, operation_id, prepare)

    def _run(self, stage: Stage, operation_id: UUID, prepare: Prepare | None) -> Stage | None:
        prepare = prepare or REGISTRY[stage]
        with self.pool.connection() as conn:
            job = self.begin(conn, stage, operation_id)
            if isinstance(job, Skip):
                return job.following
            with self.context.pinned():  # its vectors' generation, checked by the write
                write = self.context.resolve(prepare(self.context, conn, job))
                conn.commit()  # end the read transaction before taking the write lock

                with conn.transaction():
                    written = self.write(conn, stage, job.operation.kind, operation_id, write)
            webhooks.dispatch_committed(conn, self.backend)
            self.send_released(written)
            return written.logged(stage, operation_id)

    def begin(self, conn: Connection[Any], stage: Stage, operation_id: UUID) -> Job | Skip:
        """Load the operation and mark the stage running (committed); Skip when there is
        nothing to do: the operation is gone, finished, superseded, or past this stage."""
        return self.begin_many(conn, stage, [operation_id])[operation_id]

    def begin_many(
        self, conn: Connection[Any], stage: Stage, operation_ids: list[UUID]
    ) -> dict[UUID, Job | Skip]:
        """`begin` for several operations in one transaction: one read of the operations, one
        of their documents, one update marking the stage running; the live embedding
        generation read again when due (memora.pipeline.generation)."""
        self.context.follow(conn)
        ops = operations.get_operations(conn, operation_ids)
        pks = [op.document_pk for op in ops.values() if op.document_pk is not None]
        docs = documents.get_documents(conn, pks) if pks else {}
        out: dict[UUID, Job | Skip] = {}
        for operation_id in operation_ids:
            op = ops.get(operation_id)
            if op is None or op.status.terminal:
                out[operation_id] = Skip(None)
            elif op.is_done(stage):
                out[operation_id] = Skip(next_stage(stage, op.kind, skip=self.skip))
            elif op.document_pk is None and op.kind not in DOCUMENT_KINDS:
                out[operation_id] = Job(op)
            elif superseded(op, doc := docs.get(op.document_pk) if op.document_pk else None):
                operations.mark_superseded(conn, operation_id)
                out[operation_id] = Skip(None)
            else:
                assert doc is not None
                out[operation_id] = Job(op, doc)
        started = [i for i, job in out.items() if isinstance(job, Job)]
        if started:
            operations.stages_started(conn, started, stage)
        conn.commit()
        return out

    def write(
        self,
        conn: Connection[Any],
        stage: Stage,
        kind: OperationKind,
        operation_id: UUID,
        write: Writer,
    ) -> Written:
        """Inside the caller's transaction: lock the operation row, check again that the stage
        is not done, write and mark it done. The caller logs it (`Written.logged`) after its
        commit, so that no stage is logged done that a failed commit undid."""
        locked = operations.get_operation(conn, operation_id, lock=True)
        if locked is None or locked.status.terminal:
            return Written(None)
        if locked.is_done(stage):
            return Written(next_stage(stage, kind, skip=self.skip))
        if (generation := self.context.pinned_generation()) is not None:
            generations.set_local(conn, generation)
        try:
            counts = write(conn)
        except psycopg.Error as exc:
            if generations.changed(exc):  # embedded by a retired model: the retry embeds again
                self.context.follower.expire()
            raise
        following = next_stage(stage, kind, skip=self.skip)
        done = operations.stage_done(conn, operation_id, stage, following, counts)
        evolve = None
        if following is None:
            webhooks.operation_finished(conn, done)
            if locked.payload.get("end_of_conversation"):
                evolve = evolution.create_evolve(conn, locked.agent_id, "end_of_conversation")
        released: list[tuple[UUID, bool]] = []
        if stage is append_operations.RELEASED_BY and self.backend is not None:
            # an append may wait on a whole post of its conversation as on an append
            released = append_operations.release(conn, operation_id)
        return Written(following, counts, tuple(released), evolve)

    def send_released(self, written: Written) -> None:
        """After the commit of a write: the extracts of the operations it released, the evolve
        its end of conversation asked for (without a backend, the reconciler sends that)."""
        if self.backend is None:  # none was released (`write`)
            return
        for operation_id, backfill in written.released:
            hand_off(self.backend, INGEST_STAGES[0], operation_id, backfill=backfill)
        if written.evolve is not None:
            hand_off(self.backend, Stage.EVOLVE, written.evolve)

    def claim_held(self, operation_id: UUID) -> bool:
        """For the delayed extract of a held append: whether it runs the operation (it was not
        released first; memora.store.append_operations)."""
        with self.pool.connection() as conn:
            return append_operations.claim(conn, operation_id)

    def record_failure(self, stage: Stage, operation_id: UUID, error: str, *, final: bool) -> None:
        with self.pool.connection() as conn:
            with conn.transaction():
                recorded = operations.stage_error(conn, operation_id, stage, error, final=final)
                if final and recorded:
                    webhooks.operation_finished(conn, operations.get_operation(conn, operation_id))
            webhooks.dispatch_committed(conn, self.backend)
