"""One stage for many operations together: the texts of all of them embedded in one model call,
their writes in one transaction.

A stream of one- and two-message appends makes many tiny operations; run one by one, each
pays a model call, a handful of round trips and a commit. `run_batch` keeps the guarantees of
`Pipeline.run` for every operation of the batch: it is loaded and checked (gone, finished,
superseded or past the stage: skipped) and marked running (for all of them in one transaction,
`Pipeline.begin_many`); its write runs under its
own savepoint after its operation row is locked and the stage found not done, so it is written
exactly once and a failing write rolls back only its own changes. The caller enqueues each next
stage after the commit. An operation whose step fails gets its error back, the others go on;
when the shared embedding call fails, each operation's texts are embedded alone, so one bad
text fails one operation.

A batch of long conversations runs in parts (MEMORA_STAGE_BATCH_MESSAGES messages at most),
each committed and handed on before the next part is prepared: the next stage starts on the
first part while this one works on the second, instead of the whole batch moving through the
stages as one block (idle stages while the pipeline fills and drains).

`StageBatcher` gathers the operations that concurrent callers (a worker's threads, each holding
one task) submit within a bounded wait, up to a bounded number, and runs them as one batch.
Given a `send`, it also hands each part on as a batch: one next-stage task for all the
operations that go on to the same stage (after the commit, before the callers' tasks are
acknowledged), so a stream of one-message operations stays a stream of batches through the
stages instead of paying every stage's task once an operation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from opentelemetry import context as trace_context
from psycopg import Connection

from memora.basics.stages import OperationKind, Stage
from memora.nlp.batching import MicroBatcher
from memora.pipeline.context import Deferred, Job, Prepared, Writer
from memora.pipeline.runner import AHEAD, REGISTRY, Pipeline, Skip, Written
from memora.webhooks import events as webhooks

log = logging.getLogger("memora.pipeline")


@dataclass(frozen=True)
class Outcome:
    """One operation's result: the stage to enqueue next, or the error its step raised."""

    following: Stage | None = None
    error: BaseException | None = None
    sent: bool = False  # `following` was enqueued already, with its batch (`send_following`)

    def unwrap(self) -> Stage | None:
        if self.error is not None:
            raise self.error
        return self.following


# Hands a committed part's operations on; returns their outcomes as they are to be reported.
HandOn = Callable[[dict[UUID, "Outcome"]], dict[UUID, "Outcome"]]


@dataclass
class _Pending:
    operation_id: UUID
    agent_key: str
    kind: OperationKind
    prepared: Prepared


def run_batch(
    pipeline: Pipeline,
    stage: Stage,
    operation_ids: Sequence[UUID],
    *,
    on_part: HandOn | None = None,
) -> dict[UUID, Outcome]:
    """Run `stage` for every operation; each one's outcome (the errors are not raised). The
    operations run in parts of at most MEMORA_STAGE_BATCH_MESSAGES messages, each prepared,
    written and committed before the next; `on_part` gets each part's outcomes once it is
    committed (to hand its operations on at once) and returns them as they are to be
    reported."""
    hand_on = on_part or (lambda outcomes: outcomes)
    ids = list(dict.fromkeys(operation_ids))
    out: dict[UUID, Outcome] = {}
    with pipeline.pool.connection() as conn:
        try:
            jobs = pipeline.begin_many(conn, stage, ids)
        except Exception as exc:
            conn.rollback()
            return {operation_id: Outcome(error=exc) for operation_id in ids}
        if skipped := {i: Outcome(j.following) for i, j in jobs.items() if isinstance(j, Skip)}:
            out.update(hand_on(skipped))
        started = {i: job for i, job in jobs.items() if isinstance(job, Job)}
        with pipeline.context.pinned():  # its vectors' generation, checked by the writes
            for part in parts(started, pipeline.settings.stage_batch_messages):
                outcomes, writers = _prepare_part(pipeline, stage, conn, part)
                _write_all(pipeline, conn, stage, writers, outcomes)
                out.update(hand_on(outcomes))
    return out


def parts(jobs: dict[UUID, Job], messages: int) -> list[dict[UUID, Job]]:
    """The operations in their order, cut into parts of at most `messages` messages (an
    operation counts its accepted items; one with more than `messages` is a part alone)."""
    out: list[dict[UUID, Job]] = []
    size = 0
    for operation_id, job in jobs.items():
        weight = max(1, int(job.operation.counts.get("items", 1)))
        if not out or size + weight > messages:
            out.append({})
            size = 0
        out[-1][operation_id] = job
        size += weight
    return out


def _prepare_part(
    pipeline: Pipeline, stage: Stage, conn: Connection[Any], jobs: dict[UUID, Job]
) -> tuple[dict[UUID, Outcome], list[tuple[_Pending, Writer]]]:
    """One part prepared, its texts embedded in one call: the outcomes so far (errors) and
    each operation's write."""
    outcomes: dict[UUID, Outcome] = {}
    pending: list[_Pending] = []
    with _ahead(pipeline, stage, conn, list(jobs.values())):
        for operation_id, job in jobs.items():
            try:
                prepared = REGISTRY[stage](pipeline.context, conn, job)
                conn.commit()
                pending.append(_Pending(operation_id, job.agent_key, job.operation.kind, prepared))
            except Exception as exc:
                conn.rollback()
                outcomes[operation_id] = Outcome(error=exc)
    return outcomes, _writers(pipeline, pending, outcomes)


def _ahead(
    pipeline: Pipeline, stage: Stage, conn: Connection[Any], jobs: list[Job]
) -> AbstractContextManager[None]:
    """The stage's work for all the batch's operations at once (AHEAD), if it has any; a
    failure of it only loses the gain (each prepare then does its own)."""
    ahead = AHEAD.get(stage)
    if ahead is None:
        return nullcontext()
    try:
        made = ahead(pipeline.context, conn, jobs)
        conn.commit()
        return made
    except Exception:
        conn.rollback()
        log.warning("stage %s: the batch's work ahead failed", stage.value, exc_info=True)
        return nullcontext()


def _writers(
    pipeline: Pipeline, pending: list[_Pending], outcomes: dict[UUID, Outcome]
) -> list[tuple[_Pending, Writer]]:
    """Each operation's write step: the texts deferred by all of them embedded in one call."""
    deferred = [p for p in pending if isinstance(p.prepared, Deferred)]
    vectors: dict[UUID, np.ndarray] = {}
    texts, rows_of = _unique_texts(deferred)
    if texts:
        try:
            rows = pipeline.context.embed(texts)
            for p in deferred:
                vectors[p.operation_id] = rows[rows_of[p.operation_id]]
        except Exception:  # find the operation(s) whose texts fail: embed each alone
            log.warning("batch embedding failed; embedding operation by operation", exc_info=True)
    writers = []
    for p in pending:
        try:
            if isinstance(p.prepared, Deferred):
                got = vectors.get(p.operation_id)
                if got is None:  # no text, or the shared call failed
                    got = pipeline.context.embed(p.prepared.texts)
                writers.append((p, p.prepared.finish(got)))
            else:
                writers.append((p, p.prepared))
        except Exception as exc:
            outcomes[p.operation_id] = Outcome(error=exc)
    return writers


def _unique_texts(deferred: list[_Pending]) -> tuple[list[str], dict[UUID, list[int]]]:
    """The texts to embed, each key once (texts without keys each once per operation), and
    each operation's rows among them, in the order of its own texts."""
    texts: list[str] = []
    at: dict[Hashable, int] = {}
    rows_of: dict[UUID, list[int]] = {}
    for p in deferred:
        assert isinstance(p.prepared, Deferred)
        keys = p.prepared.keys or [object() for _ in p.prepared.texts]  # no key: none shared
        mine = []
        for key, text in zip(keys, p.prepared.texts, strict=True):
            if key not in at:
                at[key] = len(texts)
                texts.append(text)
            mine.append(at[key])
        rows_of[p.operation_id] = mine
    return texts, rows_of


def _write_all(
    pipeline: Pipeline,
    conn: Connection[Any],
    stage: Stage,
    writers: list[tuple[_Pending, Writer]],
    outcomes: dict[UUID, Outcome],
) -> None:
    """One transaction, a savepoint per operation (one operation alone needs none: the
    transaction is its own); in agent order, so that two batches lock agents (entity
    resolution's advisory locks) in the same order."""
    done: dict[UUID, Written] = {}
    alone = len(writers) == 1
    try:
        with conn.transaction():
            for p, write in sorted(writers, key=lambda w: (w[0].agent_key, str(w[0].operation_id))):
                try:
                    with nullcontext() if alone else conn.transaction():
                        done[p.operation_id] = pipeline.write(
                            conn, stage, p.kind, p.operation_id, write
                        )
                except Exception as exc:
                    outcomes[p.operation_id] = Outcome(error=exc)
                    if alone:
                        raise
    except Exception as exc:  # the transaction failed (its start or its commit): none written
        outcomes.update(
            {
                p.operation_id: Outcome(error=exc)
                for p, _ in writers
                if p.operation_id in done or p.operation_id not in outcomes
            }
        )
    else:  # committed: each logged as done only now
        outcomes.update({op: Outcome(w.logged(stage, op)) for op, w in done.items()})
        for written in done.values():
            pipeline.send_released(written)
    # (after a failed commit: ids that send nothing)
    webhooks.dispatch_committed(conn, pipeline.backend)


# Enqueues one task of a stage for several operations: the stage, their ids, backfill.
Send = Callable[[Stage, list[UUID], bool], None]


def send_following(
    send: Send,
    outcomes: dict[UUID, Outcome],
    backfill: dict[UUID, bool],
    traces: dict[UUID, trace_context.Context] | None = None,
) -> dict[UUID, Outcome]:
    """Each next stage of a committed batch enqueued once for all the operations going on to it
    (and to the same queue); the outcomes with `sent` set. An operation whose task could not
    be sent gets the error instead, so that its own task is retried: its stage is done then,
    and the retry sends the next one. A task is sent in the trace (`traces`: the submitting
    task's context per operation) of its first operation, which it continues."""
    groups: dict[tuple[Stage, bool], list[UUID]] = {}
    for op, outcome in outcomes.items():
        if outcome.error is None and outcome.following is not None:
            groups.setdefault((outcome.following, backfill[op]), []).append(op)
    out = dict(outcomes)
    for (following, backfilling), ops in groups.items():
        token = trace_context.attach(traces[ops[0]]) if traces else None
        try:
            send(following, ops, backfilling)
        except Exception as exc:
            log.warning("stage %s: %d operations not sent", following.value, len(ops))
            out.update({op: Outcome(error=exc) for op in ops})
        else:
            out.update({op: Outcome(following, sent=True) for op in ops})
        finally:
            if token is not None:
                trace_context.detach(token)
    return out


class StageBatcher:
    """`submit(operation_ids)` blocks until the batch holding them ran and returns their
    outcomes; a batch is what callers submitted within `max_wait` seconds of the first, up to
    `max_size` operations (a caller's operations are never split). With `send`, the batch
    enqueues the next stages itself (`send_following`), part by part."""

    def __init__(
        self,
        pipeline: Pipeline,
        stage: Stage,
        *,
        max_size: int,
        max_wait: float,
        send: Send | None = None,
    ):
        self.pipeline, self.stage, self.send = pipeline, stage, send
        self._batcher: MicroBatcher[tuple[UUID, bool, trace_context.Context]] = MicroBatcher(
            self._run, max_wait=max_wait, max_items=max_size, name=f"memora-{stage.value}-batch"
        )

    @property
    def batches(self) -> int:
        return self._batcher.calls

    def submit(
        self, operation_ids: Sequence[UUID], *, backfill: bool = False
    ) -> dict[UUID, Outcome]:
        here = trace_context.get_current()  # the task's trace, which its next stage continues
        rows = self._batcher.submit([(op, backfill, here) for op in operation_ids])
        return dict(zip(operation_ids, rows, strict=True))

    def close(self) -> None:
        self._batcher.close()

    def _run(self, items: list[tuple[UUID, bool, trace_context.Context]]) -> np.ndarray:
        ids = [op for op, _, _ in items]
        backfill = {op: b for op, b, _ in items}
        traces = {op: t for op, _, t in items}
        send = self.send

        def hand_on(part: dict[UUID, Outcome]) -> dict[UUID, Outcome]:
            return part if send is None else send_following(send, part, backfill, traces)

        outcomes = run_batch(self.pipeline, self.stage, ids, on_part=hand_on)
        log.info("stage batch", extra={"stage": self.stage.value, "operations": len(outcomes)})
        rows = np.empty(len(ids), dtype=object)  # MicroBatcher hands rows back
        rows[:] = [outcomes[op] for op in ids]
        return rows
