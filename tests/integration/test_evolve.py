"""Evolve now (seed 002 §4.5, the end of a session), through the write API and real Celery
workers: `POST /api/agents/{agent_id}/evolve` runs the agent's consolidation as an `evolve`
operation on the maintenance worker, and an append that says `end_of_conversation` asks for
one once its messages are processed; a fact changed in the conversation is superseded then,
not at the periodic job's next run."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def _append(api: Any, agent: str, conversation: str, text: str, minute: int, **more: Any) -> str:
    message = {
        "message_id": f"m{minute}",
        "role": "user",
        "speaker": "Maya",
        "content": text,
        "event_date": (START + timedelta(minutes=minute)).isoformat(),
    }
    path = f"/api/agents/{agent}/conversations/{conversation}/messages"
    response = api.post(path, json={"messages": [message], **more})
    assert response.status_code == 202, response.text
    return str(response.json()["operation_id"])


def _completed(api: Any, operation_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        op: dict[str, Any] = api.get(f"/api/operations/{operation_id}").json()
        assert op["status"] not in ("failed", "superseded"), op
        return op if op["status"] == "completed" else None

    found: dict[str, Any] = wait_until(done, 120)
    return found


def _statuses(pool: Any, agent: str) -> dict[str, str]:
    """Each memory's status by its text (superseded ones included)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT text, status FROM memory_units WHERE agent_id = %s", (agent,)
        ).fetchall()
    return {r["text"]: r["status"] for r in rows}


def _said(agent_memories: dict[str, str], words: str) -> str:
    [status] = [s for text, s in agent_memories.items() if words in text]
    return status


def test_evolve_now_supersedes_a_changed_fact(celery_api: Any, pool: Any) -> None:
    agent = f"evolve-{uuid.uuid4().hex[:8]}"
    _completed(celery_api, _append(celery_api, agent, "c1", "I live in Lisbon.", 0))
    _completed(celery_api, _append(celery_api, agent, "c1", "I moved to Porto last month!", 5))
    assert _said(_statuses(pool, agent), "Lisbon") == "active"

    answer = celery_api.post(f"/api/agents/{agent}/evolve")
    assert answer.status_code == 202, answer.text
    assert answer.json()["agent_id"] == agent
    op = _completed(celery_api, answer.json()["operation_id"])
    assert op["kind"] == "evolve" and op["stages"]["evolve"]["status"] == "done"
    assert op["counts"]["superseded"] == 1 and op["counts"]["examined"] >= 1
    assert _said(_statuses(pool, agent), "Lisbon") == "superseded"
    assert _said(_statuses(pool, agent), "Porto") == "active"

    again = celery_api.post(f"/api/agents/{agent}/evolve").json()["operation_id"]
    again = _completed(celery_api, again)
    assert again["counts"]["superseded"] == 0  # nothing left to compare

    missing = celery_api.post(f"/api/agents/nobody-{uuid.uuid4().hex[:6]}/evolve")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "agent_not_found"


def test_an_append_that_ends_the_conversation_evolves_the_agent(celery_api: Any, pool: Any) -> None:
    agent = f"evolve-{uuid.uuid4().hex[:8]}"
    _completed(celery_api, _append(celery_api, agent, "c1", "I work at Northwind.", 0))
    last = _append(
        celery_api, agent, "c1", "I joined Contoso this week!", 5, end_of_conversation=True
    )
    _completed(celery_api, last)

    def evolved() -> dict[str, Any] | None:
        ops = celery_api.get("/api/operations", params={"agent_id": agent}).json()["operations"]
        done = [o for o in ops if o["kind"] == "evolve" and o["status"] == "completed"]
        return done[0] if done else None

    op = wait_until(evolved, 120)
    assert op["counts"]["superseded"] == 1
    assert _said(_statuses(pool, agent), "Northwind") == "superseded"

    # the last message sent again (a client's retry) after its operation finished: the
    # evolve is asked for at once
    _append(celery_api, agent, "c1", "I joined Contoso this week!", 5, end_of_conversation=True)

    def evolved_twice() -> bool:
        ops = celery_api.get("/api/operations", params={"agent_id": agent}).json()["operations"]
        return sum(o["kind"] == "evolve" and o["status"] == "completed" for o in ops) == 2

    wait_until(evolved_twice, 120)
