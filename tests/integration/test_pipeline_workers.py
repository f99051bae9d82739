"""The pipeline through real Celery worker processes and a real Redis broker."""

from __future__ import annotations

import signal
import threading
import uuid
from typing import Any

import pytest

from services.workers.celery_app import create_celery
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def _conversation(n_turns: int, seed: int) -> list[dict[str, Any]]:
    people = ["Alice", "Bob", "Carol", "Dmitri"]
    places = ["Lisbon", "Denver", "Osaka", "Nairobi", "Quebec"]
    return [
        {
            "content": f"{people[t % 4]}: I visited {places[(t + seed) % 5]} "
            f"with {people[(t + 1) % 4]} "
            f"to see the museum number {seed * 100 + t}.",
            "event_date": f"2024-0{1 + seed % 9}-1{t % 10}T10:{t % 60:02d}:00Z",
        }
        for t in range(n_turns)
    ]


def _operation(api: Any, op_id: str) -> dict[str, Any]:
    return api.get(f"/api/operations/{op_id}").json()  # type: ignore[no-any-return]


def test_ingest_through_real_workers(celery_api: Any, agent_id: str, pool: Any) -> None:
    body = {"agent_id": agent_id, "document_id": "live-1", "items": _conversation(6, 1)}
    response = celery_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200
    op_id = response.json()["operation_id"]
    op = wait_until(
        lambda: (o := _operation(celery_api, op_id))["status"] == "completed" and o, 120
    )
    assert op["counts"]["units"] == 6 and op["counts"]["embedded"] == 6
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n, count(embedding) AS e FROM memory_units WHERE agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert row == {"n": 6, "e": 6}
    ready = celery_api.get("/health/ready")
    assert ready.status_code == 200, ready.json()


def test_worker_killed_mid_batch_processes_everything_exactly_once(
    celery_api: Any, worker_stack: Any, pool: Any
) -> None:
    agent = f"crash-{uuid.uuid4().hex[:8]}"
    docs = {f"doc-{i}": _conversation(12, i) for i in range(24)}
    op_ids = []
    for doc_id, items in docs.items():
        r = celery_api.post(
            "/api/memories/batch", json={"agent_id": agent, "document_id": doc_id, "items": items}
        )
        assert r.status_code == 200
        op_ids.append(r.json()["operation_id"])

    def embeds_marked_running() -> list[str]:
        with pool.connection() as conn:
            rows = conn.execute(
                "SELECT id FROM operations WHERE agent_id = %s "
                "AND stages -> 'embed' ->> 'status' = 'running'",
                (agent,),
            ).fetchall()
        return [str(r["id"]) for r in rows]

    # SIGKILL the embedding and entity workers (main and pool processes) mid-batch, then restart.
    # An embed seen running may still finish before the signal lands; what is still marked
    # running once the worker is dead was interrupted. Try again until something was.
    interrupted: list[str] = []
    for _ in range(5):
        wait_until(embeds_marked_running, 120, interval=0.02)
        for name in ("embed", "entities"):
            worker_stack.stop_process(f"worker-{name}", sig=signal.SIGKILL)
        interrupted = embeds_marked_running()
        for name in ("embed", "entities"):
            worker_stack.start_worker(name)
        if interrupted:
            break
    assert interrupted, "no embed was caught mid-run in five kills"

    def all_done() -> bool:
        return all(_operation(celery_api, o)["status"] == "completed" for o in op_ids)

    wait_until(all_done, 240, interval=1.0)
    with pool.connection() as conn:
        units = conn.execute(
            "SELECT count(*) AS n, count(embedding) AS e, "
            "count(DISTINCT (document_pk, item_index, seq)) AS distinct_positions "
            "FROM memory_units WHERE agent_id = %s",
            (agent,),
        ).fetchone()
        mention_mismatch = conn.execute(
            """
            SELECT e.canonical_name, e.mention_count, count(ue.unit_id) AS actual
            FROM entities e LEFT JOIN unit_entities ue ON ue.entity_id = e.id
            WHERE e.agent_id = %s GROUP BY e.id HAVING e.mention_count <> count(ue.unit_id)
            """,
            (agent,),
        ).fetchall()
        duplicates = conn.execute(
            "SELECT normalized_name, entity_type, count(*) FROM entities WHERE agent_id = %s "
            "GROUP BY 1, 2 HAVING count(*) > 1",
            (agent,),
        ).fetchall()
    attempts = {o: _operation(celery_api, o)["stages"]["embed"]["attempts"] for o in interrupted}
    assert all(n >= 2 for n in attempts.values()), attempts  # each ran again after the kill
    expected = 24 * 12
    assert units == {"n": expected, "e": expected, "distinct_positions": expected}
    assert mention_mismatch == []  # entity stage effects applied exactly once per document
    assert duplicates == []  # concurrent resolution never forked an entity


def test_task_events_are_off_until_flower_turns_them_on(
    celery_api: Any, worker_stack: Any, agent_id: str
) -> None:
    """MEMORA_TASK_EVENTS off (the default): the workers send no task events until a monitor
    enables them as Flower does (`enable_events`, on a timer while it runs)."""
    app = create_celery(worker_stack.settings)
    seen: list[str] = []
    receivers: list[Any] = []

    def listen() -> None:
        with app.connection_for_read() as connection:
            handlers = {"*": lambda event: seen.append(event["type"])}
            receivers.append(app.events.Receiver(connection, handlers=handlers))
            receivers[0].capture(limit=None, timeout=None, wakeup=False)  # until should_stop

    def ingest(document_id: str) -> None:
        body = {"agent_id": agent_id, "document_id": document_id, "items": _conversation(2, 3)}
        op_id = celery_api.post("/api/memories/batch", json=body).json()["operation_id"]
        wait_until(lambda: _operation(celery_api, op_id)["status"] == "completed", 120)

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    wait_until(lambda: receivers, 10)
    try:
        ingest("quiet")
        assert not [kind for kind in seen if kind.startswith("task-")]
        app.control.enable_events()
        ingest("watched")
        wait_until(lambda: "task-succeeded" in seen, 30)
        assert "task-received" in seen
    finally:
        app.control.disable_events()
        receivers[0].should_stop = True
        listener.join(10)
