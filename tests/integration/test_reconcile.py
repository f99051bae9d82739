"""The reconciler re-enqueues operations that stopped moving, and nothing runs twice.

On a database of its own: the operations back-dated here would be the suite's beat's to
reconcile too (every 2 s, onto the suite's workers) on the suite's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.basics.models import MemoryItem
from memora.basics.stages import Stage
from memora.basics.tenancy import DEFAULT_SCOPE
from memora.jobs.reconcile import reconcile
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from memora.usecases.ingest import accept_batch
from tests.conftest import own_database_pool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def own(pg_url: str) -> Iterator[tuple[str, Any]]:
    with own_database_pool(pg_url, "memora_reconcile") as database:
        yield database


@pytest.fixture(scope="module")
def own_pool(own: tuple[str, Any]) -> Any:
    return own[1]


@pytest.fixture(scope="module")
def own_pipeline(settings: Settings, own: tuple[str, Any]) -> Pipeline:
    url, pool = own
    return Pipeline(settings.model_copy(update={"database_url": url}), pool)


def test_stuck_operation_is_resumed_at_its_stage(
    own_pool: Any, own_pipeline: Pipeline, agent_id: str
) -> None:
    pool, pipeline = own_pool, own_pipeline
    items = [MemoryItem(content="Alice: We moved the launch of Project Falcon to June.")]
    with pool.connection() as conn:
        accepted = accept_batch(conn, DEFAULT_SCOPE, agent_id, items, "stuck-doc")
    # Extraction ran, then the message for the next stage was lost.
    assert pipeline.run(Stage.EXTRACT, accepted.operation_id) is Stage.EMBED
    with pool.connection() as conn:
        conn.execute(
            "UPDATE operations SET updated_at = now() - interval '1 hour' WHERE id = %s",
            (accepted.operation_id,),
        )
    # Re-running a finished stage is a no-op that only points at the next one.
    assert pipeline.run(Stage.EXTRACT, accepted.operation_id) is Stage.EMBED
    resumed = reconcile(pool, InlineBackend(pipeline), older_than_seconds=600)
    assert accepted.operation_id in {op.id for op in resumed}
    with pool.connection() as conn:
        op = conn.execute(
            "SELECT status, stages, counts FROM operations WHERE id = %s", (accepted.operation_id,)
        ).fetchone()
        units = conn.execute(
            "SELECT count(*) AS n, count(embedding) AS e FROM memory_units WHERE agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert op["status"] == "completed"
    assert op["stages"]["extract"]["attempts"] == 1
    assert units == {"n": 1, "e": 1}
    # A second sweep finds nothing to do.
    again = reconcile(pool, InlineBackend(pipeline), older_than_seconds=600)
    assert accepted.operation_id not in {op.id for op in again}


class RecordingBackend:
    """Records where the reconciler sends work instead of running it."""

    def __init__(self) -> None:
        self.sent: list[tuple[Stage, Any, bool]] = []

    def enqueue(
        self,
        stage: Stage,
        operation_id: Any,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        self.sent.append((stage, operation_id, backfill))


def test_backfill_work_waits_longer_and_goes_back_to_the_backfill_queues(
    own_pool: Any, agent_id: str
) -> None:
    pool = own_pool
    items = [MemoryItem(content="Alice: the archive turn.")]
    with pool.connection() as conn:
        live = accept_batch(conn, DEFAULT_SCOPE, agent_id, items, "live-doc")
        archived = accept_batch(conn, DEFAULT_SCOPE, agent_id, items, "old-doc", backfill=True)
        conn.execute(
            "UPDATE operations SET updated_at = now() - interval '20 minutes' WHERE id = ANY(%s)",
            ([live.operation_id, archived.operation_id],),
        )
    backend = RecordingBackend()
    ours = {live.operation_id, archived.operation_id}  # the module's other test's may be stuck
    # 20 minutes: stuck for live work (10 min), merely queued for backfill work (1 h)
    reconcile(pool, backend, older_than_seconds=600, backfill_older_than_seconds=3600)
    assert [s for s in backend.sent if s[1] in ours] == [(Stage.EXTRACT, live.operation_id, False)]
    with pool.connection() as conn:
        conn.execute(
            "UPDATE operations SET updated_at = now() - interval '2 hours' WHERE id = %s",
            (archived.operation_id,),
        )
    backend.sent.clear()
    reconcile(pool, backend, older_than_seconds=600, backfill_older_than_seconds=3600)
    assert [s for s in backend.sent if s[1] in ours] == [
        (Stage.EXTRACT, archived.operation_id, True)
    ]
