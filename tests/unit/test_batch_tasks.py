"""A stage task carrying a batch's operations (services.workers.tasks): after its batch, each
failed operation is retried alone with the task's back-off (or failed for good), the others go
on, and a task of one operation keeps Celery's own retry."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest

from memora.basics.errors import PermanentStageError
from memora.basics.stages import Stage
from memora.pipeline.batch import Outcome
from services.workers import tasks


class Recorder:
    def __init__(self) -> None:
        self.failures: list[tuple[Stage, UUID, str, bool]] = []
        self.enqueued: list[tuple[Stage, UUID, bool]] = []

    def record_failure(self, stage: Stage, op: UUID, error: str, *, final: bool) -> None:
        self.failures.append((stage, op, error, final))

    def enqueue(self, stage: Stage, op: UUID, *, backfill: bool = False, **_: Any) -> None:
        self.enqueued.append((stage, op, backfill))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    got = Recorder()
    monkeypatch.setattr(tasks, "pipeline", lambda: got)
    state = SimpleNamespace(context=SimpleNamespace(backend=got))
    monkeypatch.setattr(tasks, "worker", lambda: state)
    return got


@pytest.fixture
def embed_task(monkeypatch: pytest.MonkeyPatch) -> Any:
    task = tasks.STAGE_TASKS[Stage.EMBED]
    retried: list[dict[str, Any]] = []
    monkeypatch.setattr(task, "retry", lambda **kw: retried.append(kw))
    task.retried = retried
    yield task
    del task.retried


def test_failed_operations_of_a_batch_task_are_retried_alone_and_the_others_go_on(
    recorder: Recorder, embed_task: Any
) -> None:
    sent, unsent, flaky, broken = (uuid.uuid4() for _ in range(4))
    outcomes = {
        sent: Outcome(Stage.ENTITIES, sent=True),  # the batch enqueued it
        unsent: Outcome(Stage.ENTITIES),  # a batch without a sender: this task sends it
        flaky: Outcome(error=ConnectionError("database restarting")),
        broken: Outcome(error=PermanentStageError("bad input")),
    }
    embed_task.push_request(retries=1)
    try:
        assert tasks._settle(embed_task, outcomes, backfill=True) == "entities"
    finally:
        embed_task.pop_request()
    assert recorder.enqueued == [(Stage.ENTITIES, unsent, True)]
    [retry] = embed_task.retried
    assert retry["args"] == [str(flaky)] and retry["kwargs"] == {"backfill": True}
    assert retry["countdown"] >= 0 and isinstance(retry["exc"], ConnectionError)
    assert [(op, final) for _, op, _, final in recorder.failures] == [
        (flaky, False),
        (broken, True),
    ]


def test_an_operation_out_of_retries_fails_for_good(recorder: Recorder, embed_task: Any) -> None:
    op = uuid.uuid4()
    embed_task.push_request(retries=embed_task.max_retries)
    try:
        tasks._settle(
            embed_task, {op: Outcome(error=ConnectionError("down")), uuid.uuid4(): Outcome()}, False
        )
    finally:
        embed_task.pop_request()
    assert embed_task.retried == []
    assert [(o, final) for _, o, _, final in recorder.failures] == [(op, True)]


def test_a_task_of_one_operation_raises_its_error_for_celerys_retry(
    recorder: Recorder, embed_task: Any
) -> None:
    op = uuid.uuid4()
    with pytest.raises(ConnectionError):
        tasks._settle(embed_task, {op: Outcome(error=ConnectionError("down"))}, False)
    assert embed_task.retried == [] and recorder.failures == []
