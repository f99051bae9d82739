"""The entity_relations job on the suite's PostgreSQL: memories stored before the relation
reader last changed (here: their relations deleted, as a reader that read none left them) have
their relations read again, a batch per run, in the order they were said; then the agent is
left alone until the reader's version changes."""

from __future__ import annotations

from typing import Any

import pytest

from memora.basics.config import Settings
from memora.jobs import JOBS, JobContext, JobResult, run_job
from memora.jobs.entity_relations import CURSOR
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline

pytestmark = pytest.mark.integration

TURNS = [
    ("Maya", "Hi! I just accepted the offer from Northwind Robotics."),
    ("Maya", "My sister Lena lives in Shadyside."),
    ("Maya", "The weather was lovely on the trail today."),
    ("Maya", "Dev reports to me now, he joined last week."),
    ("Maya", "I moved to Pittsburgh in April."),
]


def _relations(pool: Any, agent: str) -> set[tuple[str, str, str, int]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT s.normalized_name AS s, r.relation, o.normalized_name AS o, "
            "cardinality(r.evidence) AS n FROM entity_relations r "
            "JOIN entities s ON s.id = r.subject_id JOIN entities o ON o.id = r.object_id "
            "WHERE r.agent_id = %s",
            (agent,),
        ).fetchall()
    return {(r["s"], r["relation"], r["o"], r["n"]) for r in rows}


def _run(settings: Settings, pool: Any, agent: str) -> JobResult:
    batched = settings.model_copy(update={"job_batch_size": 2})
    ctx = JobContext(batched, pool, InlineBackend(Pipeline(batched, pool)), agent_key=agent)
    return run_job(JOBS["entity_relations"], ctx)


def test_stored_memories_have_their_relations_read_again(
    inline_api: Any, settings: Settings, pool: Any, agent_id: str
) -> None:
    items = [
        {"content": text, "speaker": speaker, "event_date": f"2024-0{1 + n}-02T10:00:00Z"}
        for n, (speaker, text) in enumerate(TURNS)
    ]
    body = {"agent_id": agent_id, "document_id": "d1", "items": items}
    assert inline_api.post("/api/memories/batch", json=body).status_code == 200
    read_at_ingest = _relations(pool, agent_id)
    assert ("maya", "works_at", "northwind robotics", 1) in read_at_ingest
    assert ("maya", "manages", "dev", 1) in read_at_ingest
    with pool.connection() as conn:  # as a version that read none of them left the agent
        conn.execute("DELETE FROM entity_relations WHERE agent_id = %s", (agent_id,))
        conn.execute("DELETE FROM job_cursors WHERE agent_id = %s", (agent_id,))

    runs = [_run(settings, pool, agent_id) for _ in range(4)]
    assert [r.examined for r in runs] == [2, 2, 1, 0]  # two a run; then the agent is done
    assert sum(r.details["relations_added"] for r in runs) == len(read_at_ingest)
    assert _relations(pool, agent_id) == read_at_ingest  # each once, one memory each
    with pool.connection() as conn:
        done = conn.execute(
            "SELECT position FROM job_cursors WHERE job = %s AND agent_id = %s",
            (CURSOR, agent_id),
        ).fetchone()
        assert done is not None and done["position"]["created_at"].startswith("9999")
        # a reader of another version starts over, and reads the same again: nothing added
        conn.execute("DELETE FROM job_cursors WHERE agent_id = %s", (agent_id,))
    again = [_run(settings, pool, agent_id) for _ in range(3)]
    assert sum(r.examined for r in again) == len(TURNS)
    assert sum(r.details["relations_added"] for r in again) == 0
    assert _relations(pool, agent_id) == read_at_ingest
