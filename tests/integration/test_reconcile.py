"""The reconciler re-enqueues operations that stopped moving, and nothing runs twice."""

from __future__ import annotations

from typing import Any

from memora.ingest import accept_batch
from memora.models import MemoryItem
from memora.pipeline.backend import InlineBackend
from memora.pipeline.reconcile import reconcile
from memora.pipeline.stages import Stage
from memora.tenancy import DEFAULT_SCOPE


def test_stuck_operation_is_resumed_at_its_stage(pool: Any, pipeline: Any, agent_id: str) -> None:
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
    assert accepted.operation_id in {op["id"] for op in resumed}
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
    assert accepted.operation_id not in {op["id"] for op in again}
