"""One stage run for many operations together (memora.pipeline.batch), on real PostgreSQL:
in-process, where the embedder is watched, and through real Celery workers running with
MEMORA_STAGE_BATCH_SIZE > 1 (a thread per task, one batcher per stage).

On a database of its own: on the suite's, the suite's beat would call an operation that waits
(for the test to run its stages, for workers still loading their models) stuck and hand it to
the suite's unbatched workers."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES, OperationKind, Stage, next_stage
from memora.pipeline.batch import run_batch
from memora.pipeline.runner import Pipeline
from memora.store import operations
from tests.conftest import WORKER_ENV, own_database_pool, wait_until

pytestmark = pytest.mark.integration


class Recording:
    """A task backend that only records what is handed to it (stages are run by the test)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Stage, UUID]] = []

    def enqueue(
        self,
        stage: Stage,
        operation_id: UUID,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        self.sent.append((stage, operation_id))


def _two_messages(i: int) -> list[dict[str, Any]]:
    return [
        {"content": f"Ana: I adopted a puppy called Biscuit number {i} in Lisbon.",
         "event_date": "2024-03-01T10:00:00Z"},
        {"content": f"Ben: Nice, I started a pottery class on day {i}.",
         "event_date": "2024-03-01T10:01:00Z"},
    ]  # fmt: skip


def _embed_calls(pipeline: Pipeline) -> list[list[str]]:
    """The texts of each call of the pipeline's embedder from now on (a list kept current)."""
    calls: list[list[str]] = []
    embed = pipeline.context.embedder.embed

    def counting(texts: Any) -> Any:
        calls.append(list(texts))
        return embed(texts)

    pipeline.context.embedder.embed = counting  # type: ignore[method-assign]
    return calls


@pytest.fixture(scope="module")
def batch_db(pg_url: str) -> Iterator[tuple[str, Any]]:
    """The module's database: (url, pool)."""
    with own_database_pool(pg_url, "memora_batch") as database:
        yield database


@pytest.fixture(scope="module")
def db_settings(settings: Settings, batch_db: tuple[str, Any]) -> Settings:
    return settings.model_copy(update={"database_url": batch_db[0]})


@pytest.fixture(scope="module")
def batch_pool(batch_db: tuple[str, Any]) -> Any:
    return batch_db[1]


@pytest.fixture()
def recorded(db_settings: Settings, batch_pool: Any) -> Iterator[tuple[TestClient, Recording]]:
    from services.api.app import create_app

    backend = Recording()
    with TestClient(create_app(db_settings, pool=batch_pool, backend=backend)) as client:
        yield client, backend


def test_a_batch_embeds_every_operation_in_one_call_and_writes_each_once(
    recorded: tuple[TestClient, Recording], db_settings: Settings, batch_pool: Any, agent_id: str
) -> None:
    client, _ = recorded
    ids = []
    for i in range(6):
        body = {"agent_id": agent_id, "document_id": f"d{i}", "items": _two_messages(i)}
        ids.append(UUID(client.post("/api/memories/batch", json=body).json()["operation_id"]))
    # a later post of d5 supersedes its first operation
    body = {"agent_id": agent_id, "document_id": "d5", "items": _two_messages(50)}
    latest = UUID(client.post("/api/memories/batch", json=body).json()["operation_id"])
    superseded = ids.pop()
    ids.append(latest)

    pipeline = Pipeline(db_settings, batch_pool)
    calls = _embed_calls(pipeline)
    out = run_batch(pipeline, Stage.EXTRACT, [*ids, superseded])
    assert out[superseded].unwrap() is None
    for stage in INGEST_STAGES:
        calls.clear()
        outcomes = out if stage is Stage.EXTRACT else run_batch(pipeline, stage, ids)
        expected = next_stage(stage, OperationKind.INGEST)
        assert {op: outcomes[op].unwrap() for op in ids} == dict.fromkeys(ids, expected)
        if stage is Stage.EMBED:
            assert [len(texts) for texts in calls] == [12]  # six operations' units: one call
        if stage is Stage.INDEX_MESSAGES:
            assert calls == []  # every chunk's vector comes from its units
    again = run_batch(pipeline, Stage.EMBED, ids)  # redelivered: nothing written twice
    assert {op: again[op].unwrap() for op in ids} == dict.fromkeys(ids)  # completed: no next
    for op in ids:
        got = client.get(f"/api/operations/{op}").json()
        assert got["status"] == "completed", got
        assert got["stages"]["embed"]["attempts"] == 1 and got["counts"]["embedded"] == 2
        assert got["counts"]["chunks_written"] == 1 and got["counts"]["chunks_embedded"] == 0
    assert client.get(f"/api/operations/{superseded}").json()["status"] == "superseded"
    with batch_pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n, count(embedding) AS e FROM memory_units WHERE agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert row == {"n": 12, "e": 12}


def test_a_batch_of_long_operations_runs_in_parts_each_committed_before_the_next(
    recorded: tuple[TestClient, Recording], db_settings: Settings, batch_pool: Any, agent_id: str
) -> None:
    """With MEMORA_STAGE_BATCH_MESSAGES 4, three two-message operations and one of five run
    as three parts (2 + 1 + the long one alone): each part is committed, and handed on,
    before the next is embedded."""
    client, _ = recorded
    five = [
        {"content": f"Ana: I went kayaking on lake number {k} with my sister.",
         "event_date": f"2024-03-01T10:{k:02d}:00Z"}
        for k in range(5)
    ]  # fmt: skip
    ids = []
    for i, items in enumerate([*(_two_messages(i) for i in range(3)), five]):
        body = {"agent_id": agent_id, "document_id": f"p{i}", "items": items}
        ids.append(UUID(client.post("/api/memories/batch", json=body).json()["operation_id"]))
    settings = db_settings.model_copy(update={"stage_batch_messages": 4})
    pipeline = Pipeline(settings, batch_pool)
    run_batch(pipeline, Stage.EXTRACT, ids)
    calls = _embed_calls(pipeline)
    parts: list[set[UUID]] = []

    def seen_elsewhere(part: dict[UUID, Any]) -> dict[UUID, Any]:
        with batch_pool.connection() as other:
            done = {
                op: operations.get_operation(other, op).is_done(Stage.EMBED)  # type: ignore[union-attr]
                for op in ids
            }
        assert {op for op in ids if done[op]} == {op for p in [*parts, set(part)] for op in p}
        parts.append(set(part))
        return part

    out = run_batch(pipeline, Stage.EMBED, ids, on_part=seen_elsewhere)
    assert parts == [set(ids[:2]), set(ids[2:3]), set(ids[3:])]
    assert len(calls) == 3
    assert {op: out[op].unwrap() for op in ids} == dict.fromkeys(ids, Stage.ENTITIES)


def test_two_appends_of_one_conversation_in_a_batch_embed_its_units_once(
    recorded: tuple[TestClient, Recording], db_settings: Settings, batch_pool: Any, agent_id: str
) -> None:
    """Both appends' embed steps find every unit of the conversation still without a vector:
    the batch embeds each unit once, and each append completes with its units searchable."""
    client, _ = recorded
    ids = []
    for i in range(2):
        batch = [
            {"message_id": f"m{i}{j}", "speaker": "Ana", "role": "user", "content": text,
             "event_date": f"2024-03-01T10:{2 * i + j:02d}:00Z"}
            for j, text in enumerate((f"I adopted puppy {i}.", f"Pottery class {i} went well."))
        ]  # fmt: skip
        response = client.post(
            f"/api/agents/{agent_id}/conversations/chat/messages", json={"messages": batch}
        )
        assert response.status_code == 202, response.text
        ids.append(UUID(response.json()["operation_id"]))
    pipeline = Pipeline(db_settings, batch_pool)
    run_batch(pipeline, Stage.EXTRACT, ids)
    calls = _embed_calls(pipeline)
    out = run_batch(pipeline, Stage.EMBED, ids)
    assert {op: out[op].unwrap() for op in ids} == dict.fromkeys(ids, Stage.ENTITIES)
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0])) == 4  # each unit once
    with batch_pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n, count(embedding) AS e FROM memory_units WHERE agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert row == {"n": 4, "e": 4}


def test_one_failing_operation_leaves_the_others_of_its_batch_done(
    recorded: tuple[TestClient, Recording], db_settings: Settings, batch_pool: Any, agent_id: str
) -> None:
    client, _ = recorded
    ids = []
    for i in range(3):
        body = {"agent_id": agent_id, "document_id": f"f{i}", "items": _two_messages(i)}
        ids.append(UUID(client.post("/api/memories/batch", json=body).json()["operation_id"]))
    pipeline = Pipeline(db_settings, batch_pool)
    run_batch(pipeline, Stage.EXTRACT, ids)
    broken = ids[1]
    original = pipeline.write

    def failing_write(conn: Any, stage: Stage, kind: Any, operation_id: UUID, write: Any) -> Any:
        if operation_id == broken:
            conn.execute("SELECT 1/0")  # a database error inside this operation's savepoint
        return original(conn, stage, kind, operation_id, write)

    pipeline.write = failing_write  # type: ignore[method-assign]
    out = run_batch(pipeline, Stage.EMBED, ids)
    with pytest.raises(Exception, match="division by zero"):
        out[broken].unwrap()
    assert out[ids[0]].unwrap() is Stage.ENTITIES and out[ids[2]].unwrap() is Stage.ENTITIES
    assert client.get(f"/api/operations/{broken}").json()["stages"]["embed"]["status"] == "running"
    # alone in its batch (no savepoint: the transaction is its own), it fails the same way and
    # writes nothing; run again, it is written
    alone = run_batch(pipeline, Stage.EMBED, [broken])
    with pytest.raises(Exception, match="division by zero"):
        alone[broken].unwrap()
    assert client.get(f"/api/operations/{broken}").json()["stages"]["embed"]["status"] == "running"
    pipeline.write = original  # type: ignore[method-assign]
    assert run_batch(pipeline, Stage.EMBED, [broken])[broken].unwrap() is Stage.ENTITIES


def test_a_stage_is_logged_done_only_once_its_transaction_has_committed(
    recorded: tuple[TestClient, Recording], db_settings: Settings, batch_pool: Any, agent_id: str
) -> None:
    """An operator reading "stage done" can count on it: each is logged after the commit that
    wrote the stage (another connection already sees it done), batched or one by one."""
    client, _ = recorded
    ids = []
    for i in range(2):
        body = {"agent_id": agent_id, "document_id": f"l{i}", "items": _two_messages(i)}
        ids.append(UUID(client.post("/api/memories/batch", json=body).json()["operation_id"]))
    seen: list[tuple[str, bool]] = []

    class SeenElsewhere(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "stage done":
                with batch_pool.connection() as other:
                    op = operations.get_operation(other, UUID(record.__dict__["operation"]))
                    assert op is not None
                    seen.append((record.__dict__["stage"], op.is_done(Stage(record.stage))))

    logger, handler = logging.getLogger("memora.pipeline"), SeenElsewhere()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        pipeline = Pipeline(db_settings, batch_pool)
        run_batch(pipeline, Stage.EXTRACT, ids)  # batched
        pipeline.run(Stage.EMBED, ids[0])  # one by one
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert seen == [("extract", True), ("extract", True), ("embed", True)]


# ------------------------------------------------------------------ through Celery workers
@pytest.fixture(scope="module")
def batching_stack(db_settings: Settings, redis_url: str, data_dir: Path) -> Iterator[Any]:
    """The stage workers with batching on, on their own Redis and PostgreSQL databases (not
    the suite's)."""
    from services.cli.stack import WORKER_QUEUES, Stack

    broker = re.sub(r"/\d*$", "", redis_url) + "/7"
    stack_settings = db_settings.model_copy(
        update={
            "broker_url": broker,
            "stage_batch_size": 8,
            "data_dir": data_dir / "batch-stack",  # heartbeat files of its own
        }
    )
    stack = Stack(
        stack_settings,
        workers={s.value: WORKER_QUEUES[s.value] for s in INGEST_STAGES},
        with_api=False,
        with_query=False,
        with_beat=False,
        log_dir=data_dir / "batch-worker-logs",
        # the suite's 10 s visibility timeout is for its crash tests; on a loaded machine a batch
        # can take longer, and its redelivery (a second attempt) is not what this test is about
        extra_env={
            **WORKER_ENV,
            "MEMORA_STAGE_BATCH_WAIT_MS": "1000",  # wide enough for a loaded machine
            "MEMORA_VISIBILITY_TIMEOUT": "120",
            "MEMORA_TASK_MAX_RETRIES": "2",
        },
    )
    yield stack  # started by the test
    stack.stop()


def _started(stack: Any) -> None:
    """The module's workers started once and ready (models loaded: their heartbeat files)."""
    from services.workers.probe import check_heartbeat

    if stack.processes:
        return
    stack.start()
    beats = [
        Path(stack.worker_ops_env(name)["MEMORA_WORKER_HEARTBEAT_FILE"]) for name in stack.workers
    ]
    wait_until(lambda: all(check_heartbeat(b)[0] for b in beats), 180, interval=0.5)


def test_real_workers_run_many_small_operations_in_shared_batches(
    batching_stack: Any, batch_pool: Any, agent_id: str
) -> None:
    from services.api.app import create_app

    # Workers first, ready, then the operations in one quick burst: each stage's batcher takes
    # them together.
    _started(batching_stack)
    app = create_app(batching_stack.settings, pool=batch_pool)
    with TestClient(app) as client:
        ops = []
        for i in range(16):
            body = {"agent_id": agent_id, "document_id": f"c{i}", "items": _two_messages(i)}
            ops.append(client.post("/api/memories/batch", json=body).json()["operation_id"])

        def all_done() -> bool:
            return all(
                client.get(f"/api/operations/{op}").json()["status"] == "completed" for op in ops
            )

        wait_until(all_done, 180, interval=0.5)
        commits: dict[str, int] = {}
        for op in ops:
            got = client.get(f"/api/operations/{op}").json()
            assert got["counts"]["embedded"] == 2 and got["counts"]["chunks_written"] == 1
            assert all(s["attempts"] == 1 for s in got["stages"].values()), got["stages"]
            # a stage's finished_at is its transaction's now(): shared by a batch's operations
            at = got["stages"]["embed"]["finished_at"]
            commits[at] = commits.get(at, 0) + 1
    assert max(commits.values()) > 1, commits  # operations shared embed batches


POISON = """
CREATE OR REPLACE FUNCTION test_poisoned_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'this unit cannot take a vector'; END $$;
CREATE TRIGGER test_poisoned_embedding BEFORE UPDATE OF embedding ON memory_units
    FOR EACH ROW WHEN (NEW.text LIKE '%%poisoned%%') EXECUTE FUNCTION test_poisoned_embedding();
"""


def test_an_operation_failing_in_a_shared_batch_is_retried_alone_and_the_others_go_on(
    batching_stack: Any, batch_db: tuple[str, Any], agent_id: str
) -> None:
    from services.api.app import create_app

    _started(batching_stack)
    url, batch_pool = batch_db
    with psycopg.connect(url, autocommit=True) as conn:  # one operation's embed always fails
        conn.execute(POISON)
    try:
        with TestClient(create_app(batching_stack.settings, pool=batch_pool)) as client:
            ops = []
            for i in range(8):
                items = _two_messages(i)
                if i == 3:
                    items[0]["content"] = "Ana: my poisoned notebook got wet today."
                body = {"agent_id": agent_id, "document_id": f"p{i}", "items": items}
                ops.append(client.post("/api/memories/batch", json=body).json()["operation_id"])

            def final() -> list[dict[str, Any]] | None:
                got = [client.get(f"/api/operations/{op}").json() for op in ops]
                return got if all(g["status"] in ("completed", "failed") for g in got) else None

            done = wait_until(final, 180, interval=0.5)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER test_poisoned_embedding ON memory_units")
    poisoned = done.pop(3)
    assert poisoned["status"] == "failed" and "cannot take a vector" in poisoned["error"]
    assert poisoned["stages"]["embed"]["attempts"] == 3  # 1 + MEMORA_TASK_MAX_RETRIES, alone
    for op in done:  # the others of its batches: done once each
        assert op["status"] == "completed", op
        assert all(s["attempts"] == 1 for s in op["stages"].values()), op["stages"]


def test_an_error_after_a_stage_is_done_is_not_recorded_on_it(
    recorded: tuple[TestClient, Recording], db_settings: Settings, batch_pool: Any, agent_id: str
) -> None:
    """A task of several operations that fails as a whole after its batch committed (its next
    stage could not be sent) does not mark a done stage failed: the retry or the reconciler
    sends the next one."""
    client, _ = recorded
    body = {"agent_id": agent_id, "document_id": "late", "items": _two_messages(1)}
    op = UUID(client.post("/api/memories/batch", json=body).json()["operation_id"])
    pipeline = Pipeline(db_settings, batch_pool)
    assert run_batch(pipeline, Stage.EXTRACT, [op])[op].unwrap() is Stage.EMBED
    pipeline.record_failure(Stage.EXTRACT, op, "ConnectionError: broker down", final=True)
    with batch_pool.connection() as conn:
        after = operations.get_operation(conn, op)
    assert after is not None and after.status != "failed" and after.error is None
    assert after.stages[Stage.EXTRACT].status == "done"
    pipeline.record_failure(Stage.EMBED, op, "ConnectionError: still down", final=False)
    with batch_pool.connection() as conn:
        embed = operations.get_operation(conn, op).stages[Stage.EMBED]  # type: ignore[union-attr]
    assert embed.status == "retrying"  # a stage not done still records its attempts' errors
