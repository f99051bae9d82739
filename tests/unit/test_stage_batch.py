"""Batching one stage across operations (memora.pipeline.batch) without a database: the
batcher gathers concurrent submissions into one run, and the shared embedding call isolates
an operation whose texts fail."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import numpy as np
import pytest

from memora.basics.config import Settings
from memora.basics.stages import OperationKind, Stage
from memora.pipeline import batch
from memora.pipeline.batch import Outcome, StageBatcher, _Pending, _writers
from memora.pipeline.context import Deferred, StageContext


def test_concurrent_submissions_run_as_one_batch_and_each_gets_its_own_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = [uuid.uuid4() for _ in range(6)]
    bad = ids[3]
    calls: list[list[UUID]] = []

    def fake_run(pipeline: Any, stage: Stage, operation_ids: list[UUID], **_: Any) -> Any:
        calls.append(list(operation_ids))
        return {
            op: Outcome(error=RuntimeError("its own")) if op == bad else Outcome(Stage.ENTITIES)
            for op in operation_ids
        }

    monkeypatch.setattr(batch, "run_batch", fake_run)
    batcher = StageBatcher(SimpleNamespace(), Stage.EMBED, max_size=16, max_wait=0.5)  # type: ignore[arg-type]
    results: dict[UUID, Any] = {}
    start = threading.Barrier(len(ids))

    def submit(op: UUID) -> None:
        start.wait()
        try:
            results[op] = batcher.submit([op])[op].unwrap()
        except RuntimeError as exc:
            results[op] = exc

    threads = [threading.Thread(target=submit, args=(op,)) for op in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert len(calls) == 1 and sorted(calls[0]) == sorted(ids)
    assert isinstance(results.pop(bad), RuntimeError)
    assert set(results.values()) == {Stage.ENTITIES}


def test_a_batch_is_bounded_by_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fake_run(pipeline: Any, stage: Stage, operation_ids: list[UUID], **_: Any) -> Any:
        calls.append(len(operation_ids))
        return {op: Outcome(None) for op in operation_ids}

    monkeypatch.setattr(batch, "run_batch", fake_run)
    batcher = StageBatcher(SimpleNamespace(), Stage.EMBED, max_size=2, max_wait=0.3)  # type: ignore[arg-type]
    threads = [threading.Thread(target=batcher.submit, args=([uuid.uuid4()],)) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert sum(calls) == 5 and max(calls) <= 2


def test_a_batch_hands_its_operations_on_in_one_task_per_next_stage_and_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live, archive, done, bad = ([uuid.uuid4() for _ in range(n)] for n in (3, 2, 1, 1))
    after = {op: Outcome(Stage.ENTITIES) for op in (*live, *archive)}
    after |= {done[0]: Outcome(None), bad[0]: Outcome(error=RuntimeError("its own"))}
    monkeypatch.setattr(
        batch, "run_batch", lambda p, s, ids, on_part: on_part({op: after[op] for op in ids})
    )
    sent: list[tuple[Stage, list[UUID], bool]] = []
    batcher = StageBatcher(
        SimpleNamespace(),  # type: ignore[arg-type]
        Stage.EMBED,
        max_size=16,
        max_wait=0.5,
        send=lambda stage, ids, backfill: sent.append((stage, ids, backfill)),
    )
    results: dict[UUID, Outcome] = {}
    start = threading.Barrier(2)

    def submit(ids: list[UUID], backfill: bool) -> None:
        start.wait()
        results.update(batcher.submit(ids, backfill=backfill))

    threads = [
        threading.Thread(target=submit, args=([*live, *done, *bad], False)),
        threading.Thread(target=submit, args=(archive, True)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert batcher.batches == 1
    # one task a next stage and queue, carrying every operation going on to it
    assert sorted((s, sorted(ids), b) for s, ids, b in sent) == sorted(
        [(Stage.ENTITIES, sorted(live), False), (Stage.ENTITIES, sorted(archive), True)]
    )
    going_on = [*live, *archive]
    assert all(results[op].sent and results[op].unwrap() is Stage.ENTITIES for op in going_on)
    assert results[done[0]] == Outcome(None)  # finished: nothing to send
    assert isinstance(results[bad[0]].error, RuntimeError) and not results[bad[0]].sent


def test_a_batch_is_cut_into_parts_by_messages_in_its_order() -> None:
    sizes = {"a": 30, "b": 60, "c": 50, "d": 200, "e": 1, "f": None}
    jobs = {
        uuid.uuid5(uuid.NAMESPACE_OID, name): SimpleNamespace(
            operation=SimpleNamespace(counts={} if n is None else {"items": n})
        )
        for name, n in sizes.items()
    }
    names = {op: name for op, name in zip(jobs, sizes, strict=True)}
    cut = batch.parts(jobs, 128)  # type: ignore[arg-type]
    # a + b fit, c would overflow; d is larger than a part: alone; e + f (no count: one) fit
    assert [[names[op] for op in part] for part in cut] == [["a", "b"], ["c"], ["d"], ["e", "f"]]
    assert batch.parts({}, 128) == []


def test_operations_whose_next_task_cannot_be_sent_get_the_error_for_their_own_retry() -> None:
    ok, other = uuid.uuid4(), uuid.uuid4()
    outcomes = {ok: Outcome(Stage.LINKS), other: Outcome(Stage.OPINIONS)}

    def send(stage: Stage, ids: list[UUID], backfill: bool) -> None:
        if stage is Stage.OPINIONS:
            raise ConnectionError("broker down")

    out = batch.send_following(send, outcomes, {ok: False, other: False})
    assert out[ok] == Outcome(Stage.LINKS, sent=True)
    assert isinstance(out[other].error, ConnectionError) and not out[other].sent


class CountingEmbedder:
    def __init__(self, poison: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.poison = poison

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.poison in texts:
            raise ValueError("cannot embed this")
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)


def _pipeline(embedder: CountingEmbedder) -> Any:
    return SimpleNamespace(context=StageContext(Settings(), embedder=embedder))


def _pending(texts: list[str]) -> tuple[_Pending, list[np.ndarray]]:
    got: list[np.ndarray] = []

    def finish(vectors: np.ndarray) -> Any:
        got.append(vectors)
        return lambda conn: {"embedded": len(vectors)}

    op = _Pending(uuid.uuid4(), "a", OperationKind.INGEST, Deferred(texts, finish))
    return op, got


def test_every_operations_texts_go_in_one_embedding_call() -> None:
    embedder = CountingEmbedder()
    ops = [_pending(["a", "bb"]), _pending(["ccc"]), _pending([])]
    outcomes: dict[UUID, Outcome] = {}
    writers = _writers(_pipeline(embedder), [p for p, _ in ops], outcomes)
    assert embedder.calls == [["a", "bb", "ccc"]]
    assert len(writers) == 3 and not outcomes
    assert [g[0][:, 0].tolist() for _, g in ops] == [[1.0, 2.0], [3.0], []]


def test_a_text_that_cannot_be_embedded_fails_its_operation_only() -> None:
    embedder = CountingEmbedder(poison="bad")
    ops = [_pending(["a"]), _pending(["bad", "b"]), _pending(["c"])]
    outcomes: dict[UUID, Outcome] = {}
    writers = _writers(_pipeline(embedder), [p for p, _ in ops], outcomes)
    assert len(writers) == 2
    failed = ops[1][0].operation_id
    assert set(outcomes) == {failed} and isinstance(outcomes[failed].error, ValueError)
    assert embedder.calls[0] == ["a", "bad", "b", "c"] and len(embedder.calls) == 4


def test_a_transaction_that_cannot_start_fails_every_operation_of_the_batch() -> None:
    """PostgreSQL restarting: the batch's transaction fails before any write, and every
    operation gets that error (for its own retry), none is left without an outcome."""

    class Gone:
        def transaction(self) -> Any:
            raise ConnectionError("server closed the connection unexpectedly")

    writers = [(_pending([text])[0], lambda conn: {}) for text in ("a", "b")]
    outcomes: dict[UUID, Outcome] = {}
    pipeline = SimpleNamespace(backend=None)
    batch._write_all(pipeline, Gone(), Stage.EMBED, writers, outcomes)  # type: ignore[arg-type]
    assert [type(outcomes[p.operation_id].error) for p, _ in writers] == [ConnectionError] * 2
