"""One memory in full on the README's port: `GET /api/agents/{agent_id}/memories/{id}` through
the deployed topology (the write API under uvicorn forwarding to the query service under
uvicorn). The memory's lifecycle (superseded, forgotten, restored, linked) is made through the
same port, and its one answer holds both halves: status and history, entities and links."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memora.basics.config import Settings
from tests.integration.stack_support import stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[httpx.Client]:
    for url in stack(settings, pool, pipeline):
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def test_a_restored_memory_shows_its_history_entities_and_links(
    api: httpx.Client, agent_id: str
) -> None:
    url = f"/api/agents/{agent_id}"
    home = {"content": "Alice lives in Paris.", "category": "home", "importance": 8}
    paris = _ok(api.post(f"{url}/remember", json=home))
    berlin = _ok(api.post(f"{url}/remember", json={"content": "Alice moved to Berlin."}))
    assert berlin["decision"] == "SUPERSEDE" and berlin["superseded_id"] == paris["memory_id"]
    other = _ok(api.post(f"{url}/remember", json={"content": "Hank's codename is Bluebird."}))
    memory = f"{url}/memories/{paris['memory_id']}"

    superseded = _ok(api.get(memory))
    assert superseded["status"] == "superseded"
    assert superseded["superseded_by"] == berlin["memory_id"]
    assert [e["event"] for e in superseded["history"]] == ["added", "superseded"]
    assert _ok(api.get(f"{url}/memories/{berlin['memory_id']}"))["replaced"] == [paris["memory_id"]]

    forgotten = {"memory_id": paris["memory_id"], "reason": "asked to"}
    assert _ok(api.post(f"{url}/forget", json=forgotten))["forgotten"]
    assert _ok(api.get(memory))["status"] == "forgotten"
    assert _ok(api.post(f"{memory}/restore"))["restored"] is True
    link = {"memory_id": paris["memory_id"], "related_memory_id": other["memory_id"],
            "relationship": "met_at"}  # fmt: skip
    _ok(api.post(f"{url}/link", json=link))

    view = _ok(api.get(memory))
    # the lifecycle's half: status, what changed it and when, every change in order
    assert view["id"] == paris["memory_id"] and view["agent_id"] == agent_id
    assert view["text"] == "Alice lives in Paris." and view["fact_type"] == "world"
    assert view["status"] == "active" and view["superseded_by"] is None
    assert view["category"] == "home" and view["importance"] == 8
    events = [e["event"] for e in view["history"]]
    assert events == ["added", "superseded", "forgotten", "restored", "linked"]
    assert view["history"][1]["related_id"] == berlin["memory_id"]
    assert view["history"][2]["reason"] == "asked to"
    assert view["history"][3]["details"]["from"] == "forgotten"
    assert all(e["actor"] == "api" for e in view["history"])
    # the graph's half: dates, entities, links with their labels
    for field in ("event_date", "mentioned_at", "created_at", "status_at"):
        assert view[field], field
    assert view["document_id"] is None and view["embedded"] is True
    assert "Paris" in {e["name"] for e in view["entities"]}
    assert all({"id", "entity_type", "mention"} <= set(e) for e in view["entities"])
    first = view["links"][0]  # explicit links first
    assert first == {"target": other["memory_id"], "type": "explicit", "weight": 1.0,
                     "relationship": "met_at", "label": "Hank's codename is Bluebird.",
                     "status": "active"}  # fmt: skip
    to_berlin = [x for x in view["links"] if x["target"] == berlin["memory_id"]]
    assert to_berlin and all(x["status"] == "active" for x in to_berlin)


def test_a_pipeline_memory_has_its_document_and_unknown_ids_are_404(
    api: httpx.Client, agent_id: str
) -> None:
    items = [{"content": "Maya joined Northwind in Oslo as a designer.",
              "event_date": "2024-05-02T10:00:00Z"}]  # fmt: skip
    body = {"agent_id": agent_id, "items": items, "document_id": "maya-notes"}
    operation = _ok(api.post("/api/memories/batch", json=body))["operation_id"]
    assert _ok(api.get(f"/api/operations/{operation}"))["status"] == "completed"
    page = _ok(api.get("/api/graph", params={"agent_id": agent_id, "depth": 0}))
    unit = next(n for n in page["nodes"] if n["kind"] == "unit")
    view = _ok(api.get(f"/api/agents/{agent_id}/memories/{unit['id']}"))
    assert view["document_id"] == "maya-notes" and view["status"] == "active"
    assert view["event_date"].startswith("2024-05-02") and view["entities"]
    assert view["history"] == [] and view["replaced"] == []

    missing = api.get(f"/api/agents/{agent_id}/memories/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "memory_not_found"
    assert api.get(f"/api/agents/someone-else/memories/{unit['id']}").status_code == 404
