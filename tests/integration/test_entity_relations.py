"""Entity relations (issue 57, item 4) through real Celery workers: a conversation stored through
the API, its relations read by the entity stage and served at
`GET /api/agents/{agent_id}/entities/{name}` with their evidence; a move supersedes where one
lived, leaving ends where one worked; deleting a memory or the agent takes them away."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.integration

AGENT = "relations-agent"
# (speaker, text, date), written for this test
TURNS = [
    ("Maya", "I live in Lisbon with my brother Rui.", "2024-03-01T10:00:00Z"),
    ("Maya", "I work at Northwind now, on the design team.", "2024-03-02T10:00:00Z"),
    ("Leo", "Nice! My sister Ana works at Northwind too.", "2024-03-02T10:05:00Z"),
    ("Maya", "Big news: I moved to Berlin last week!", "2024-06-01T10:00:00Z"),
    ("Maya", "And I left Northwind, the commute was too long.", "2024-06-02T10:00:00Z"),
]


def _store(api: Any, agent: str, document: str, turns: list[tuple[str, str, str]]) -> None:
    items = [
        {"message_id": f"m{i}", "speaker": who, "role": "user", "content": text,
         "event_date": when}
        for i, (who, text, when) in enumerate(turns)
    ]  # fmt: skip
    posted = api.post(
        "/api/memories/batch", json={"agent_id": agent, "document_id": document, "items": items}
    )
    assert posted.status_code == 200, posted.text
    path = f"/api/operations/{posted.json()['operation_id']}"
    status = wait_until(
        lambda: (s := api.get(path).json()["status"]) in ("completed", "failed") and s, 120
    )
    assert status == "completed", api.get(path).json()


@pytest.fixture(scope="module")
def stored(celery_api: Any) -> str:
    _store(celery_api, AGENT, "chat", TURNS)
    return AGENT


def _entity(api: Any, agent: str, name: str) -> dict[str, Any]:
    response = api.get(f"/api/agents/{agent}/entities/{name}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _by(entity: dict[str, Any], relation: str, other: str) -> dict[str, Any]:
    found = [
        r for r in entity["relations"]
        if r["relation"] == relation and r["other"]["name"].casefold() == other.casefold()
    ]  # fmt: skip
    assert len(found) == 1, entity["relations"]
    return found[0]


def _text(api: Any, agent: str, memory: str) -> str:
    response = api.get(f"/api/agents/{agent}/memories/{memory}")
    assert response.status_code == 200, response.text
    text: str = response.json()["text"]
    return text


def test_relations_are_served_with_their_evidence(stored: str, celery_api: Any) -> None:
    maya = _entity(celery_api, stored, "Maya")
    assert maya["canonical_name"] == "Maya" and maya["mention_count"] >= 1
    brother = _by(maya, "sibling_of", "Rui")
    assert brother["status"] == "current" and brother["valid_until"] is None
    assert any("Rui" in _text(celery_api, stored, m) for m in brother["evidence"])
    # the other end sees the same relation, the other way
    rui = _entity(celery_api, stored, "rui")  # any case: names are matched normalised
    assert _by(rui, "sibling_of", "Maya")["id"] == brother["id"]
    leo = _entity(celery_api, stored, "Leo")
    assert _by(leo, "sibling_of", "Ana")["status"] == "current"
    ana = _entity(celery_api, stored, "Ana")
    assert _by(ana, "works_at", "Northwind")["direction"] == "outgoing"


def test_a_move_supersedes_where_one_lived_and_leaving_ends_a_job(
    stored: str, celery_api: Any
) -> None:
    maya = _entity(celery_api, stored, "Maya")
    lisbon, berlin = _by(maya, "lives_in", "Lisbon"), _by(maya, "lives_in", "Berlin")
    assert berlin["status"] == "current" and berlin["valid_until"] is None
    assert lisbon["status"] == "superseded" and lisbon["superseded_by"] == berlin["id"]
    assert lisbon["valid_until"] == berlin["valid_from"]
    current = [r["status"] == "current" for r in maya["relations"]]
    assert current == sorted(current, reverse=True)  # current first
    job = _by(maya, "works_at", "Northwind")
    assert job["status"] == "ended" and job["superseded_by"] is None
    assert "left Northwind" in _text(celery_api, stored, job["ended_by"])
    assert any("Northwind now" in _text(celery_api, stored, m) for m in job["evidence"])
    # Ana's job at the same firm is hers: Maya leaving it ends nothing of Ana's
    assert _by(_entity(celery_api, stored, "Ana"), "works_at", "Northwind")["status"] == "current"


def test_the_graph_draws_current_relations_between_entities(stored: str, celery_api: Any) -> None:
    page = celery_api.get("/api/graph", params={"agent_id": stored, "entity": "Maya", "depth": 0})
    assert page.status_code == 200, page.text
    names = {n["id"]: n["label"] for n in page.json()["nodes"] if n["kind"] == "entity"}
    drawn = {
        (names[e["source"]], e["relation"], names[e["target"]])
        for e in page.json()["edges"]
        if e["type"] == "relation"
    }
    assert ("Maya", "lives_in", "Berlin") in drawn
    assert ("Maya", "lives_in", "Lisbon") not in drawn  # superseded
    assert ("Maya", "works_at", "Northwind") not in drawn  # ended
    assert all(e["relation"] is None for e in page.json()["edges"] if e["type"] != "relation")


def test_unknown_entities_and_agents_are_404(stored: str, celery_api: Any) -> None:
    missing = celery_api.get(f"/api/agents/{stored}/entities/Nobody")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "entity_not_found"
    agent = celery_api.get("/api/agents/relations-none/entities/Maya")
    assert agent.status_code == 404 and agent.json()["error"]["code"] == "agent_not_found"
    bad = celery_api.get(f"/api/agents/{stored}/entities/{'x' * 301}")
    assert bad.status_code == 422


def test_relations_go_with_their_evidence_and_their_agent(celery_api: Any, pool: Any) -> None:
    agent = "relations-deleted"
    _store(celery_api, agent, "a", TURNS[:1])
    _store(celery_api, agent, "b", [("Maya", "I work at Northwind.", "2024-03-02T10:00:00Z")])
    maya = _entity(celery_api, agent, "Maya")
    assert {r["relation"] for r in maya["relations"]} == {"lives_in", "sibling_of", "works_at"}
    # the document stating the job goes: so does the relation it alone was evidence of
    assert celery_api.delete(f"/api/agents/{agent}/documents/b").status_code == 200
    maya = _entity(celery_api, agent, "Maya")
    assert {r["relation"] for r in maya["relations"]} == {"lives_in", "sibling_of"}
    deleted = celery_api.delete(f"/api/agents/{agent}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["entity_relations"] == 2
    with pool.connection() as conn:
        left = conn.execute(
            "SELECT count(*) AS n FROM entity_relations WHERE agent_id LIKE %s", (f"%{agent}",)
        ).fetchone()
    assert left["n"] == 0
