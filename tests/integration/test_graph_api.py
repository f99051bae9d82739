"""GET /api/graph and GET /api/agents/{id}/memories/{id} on real PostgreSQL, with memories
written by the real pipeline (inline): bounds, paging, filters, seeds, gzip, tenants."""

from __future__ import annotations

import gzip
import uuid
from typing import Any

import pytest

from tests.integration.auth_support import auth_api, make_tenant  # noqa: F401 - fixture

pytestmark = pytest.mark.integration

LINES = [
    "Maya: I met Lena in Pittsburgh to plan the robotics workshop.",
    "Lena: The workshop at Carnegie Mellon starts on June 3rd.",
    "Maya: I will bring the lidar sensors from Boston.",
    "Lena: Tom from Acme Robotics will present the new arm.",
    "Assistant: I reminded Maya to book the hotel in Pittsburgh.",
    "Maya: Tom said the Acme arm can lift ten kilograms.",
    "Lena: After the workshop we fly back to Boston on June 6th.",
    "Maya: The lidar calibration failed twice last week.",
]


def _ingest(api: Any, agent: str, headers: dict[str, str] | None = None) -> None:
    items = [
        {"content": line, "event_date": f"2024-05-0{1 + i // 3}T1{i % 10}:00:00Z"}
        for i, line in enumerate(LINES)
    ]
    body = {"agent_id": agent, "items": items, "document_id": "workshop"}
    response = api.post("/api/memories/batch", json=body, headers=headers or {})
    assert response.status_code == 200, response.text
    op = api.get(f"/api/operations/{response.json()['operation_id']}", headers=headers or {})
    assert op.json()["status"] == "completed", op.text


@pytest.fixture(scope="module")
def agent(inline_api: Any) -> str:
    name = f"graph-{uuid.uuid4().hex[:10]}"
    _ingest(inline_api, name)
    return name


def _graph(api: Any, **params: Any) -> dict[str, Any]:
    response = api.get("/api/graph", params=params)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _check_consistent(graph: dict[str, Any], limit: int) -> None:
    ids = [n["id"] for n in graph["nodes"]]
    assert len(ids) == len(set(ids)) and len(ids) <= limit
    for edge in graph["edges"]:
        assert edge["source"] in ids and edge["target"] in ids, edge
    assert len(graph["edges"]) <= 4 * len(ids) + len(ids) * limit  # links + mentions
    for node in graph["nodes"]:
        assert len(node["label"]) <= 80
        assert "text" not in node and "embedding" not in node


def test_graph_has_units_entities_and_links(inline_api: Any, agent: str, pool: Any) -> None:
    graph = _graph(inline_api, agent_id=agent)
    _check_consistent(graph, 500)
    kinds = {n["kind"] for n in graph["nodes"]}
    assert kinds == {"unit", "entity"}
    with pool.connection() as conn:
        units = conn.execute(
            "SELECT count(*) AS n FROM memory_units WHERE agent_id = %s", (agent,)
        ).fetchone()["n"]
    assert sum(n["kind"] == "unit" for n in graph["nodes"]) == units
    types = {e["type"] for e in graph["edges"]}
    assert "mentions" in types and types & {"temporal", "semantic", "entity"}
    names = {n["label"] for n in graph["nodes"] if n["kind"] == "entity"}
    assert {"Pittsburgh", "Boston"} <= names
    assert graph["next_cursor"] is None
    for edge in graph["edges"]:
        assert 0 <= edge["weight"] <= 1 or edge["type"] in {"causes", "caused_by"}


def test_limit_bounds_the_nodes_and_has_a_hard_cap(inline_api: Any, agent: str) -> None:
    for limit in (1, 3, 6):
        graph = _graph(inline_api, agent_id=agent, limit=limit)
        _check_consistent(graph, limit)
        assert graph["nodes"]
    too_many = inline_api.get("/api/graph", params={"agent_id": agent, "limit": 2001})
    assert too_many.status_code == 422
    assert inline_api.get("/api/graph", params={"agent_id": agent, "depth": 4}).status_code == 422
    assert inline_api.get("/api/graph").status_code == 422  # agent_id is required


def test_cursor_pages_through_every_unit_once(inline_api: Any, agent: str) -> None:
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        params = {"agent_id": agent, "limit": 5, "depth": 0}
        graph = _graph(inline_api, **params, **({"cursor": cursor} if cursor else {}))
        _check_consistent(graph, 5)
        seen += [n["id"] for n in graph["nodes"] if n["kind"] == "unit"]
        cursor = graph["next_cursor"]
        if cursor is None:
            break
    everything = _graph(inline_api, agent_id=agent, depth=0)
    all_units = {n["id"] for n in everything["nodes"] if n["kind"] == "unit"}
    assert len(seen) == len(set(seen)) and set(seen) == all_units and len(seen) > 4
    dates = [n["date"] for n in everything["nodes"] if n["kind"] == "unit"]
    assert dates == sorted(dates, reverse=True)  # newest first


def test_bad_cursor_and_conflicting_seeds_are_422(inline_api: Any, agent: str) -> None:
    for cursor in ("not-a-cursor", "MTIz", "!!"):
        response = inline_api.get("/api/graph", params={"agent_id": agent, "cursor": cursor})
        assert response.status_code == 422, cursor
        if cursor != "!!":
            assert response.json()["error"]["code"] == "invalid_cursor"
    both = inline_api.get("/api/graph", params={"agent_id": agent, "q": "lidar", "entity": "Tom"})
    assert both.status_code == 422 and both.json()["error"]["code"] == "conflicting_seeds"


def test_fact_type_link_type_and_time_filters(inline_api: Any, agent: str) -> None:
    agent_only = _graph(inline_api, agent_id=agent, fact_type="agent")
    units = [n for n in agent_only["nodes"] if n["kind"] == "unit"]
    assert units and {n["fact_type"] for n in units} == {"agent"}
    temporal = _graph(inline_api, agent_id=agent, link_type="temporal")
    assert {e["type"] for e in temporal["edges"]} <= {"temporal", "mentions"}
    assert any(e["type"] == "temporal" for e in temporal["edges"])
    window = _graph(inline_api, agent_id=agent, since="2024-05-02T00:00:00Z", until="2024-05-03")
    dates = [n["date"] for n in window["nodes"] if n["kind"] == "unit"]
    assert dates and all(d.startswith("2024-05-02") for d in dates)


def test_seed_by_search_and_by_entity(inline_api: Any, agent: str) -> None:
    found = _graph(inline_api, agent_id=agent, q="lidar calibration", depth=0)
    labels = [n["label"] for n in found["nodes"] if n["kind"] == "unit"]
    assert labels and all("lidar" in label.lower() for label in labels)
    assert "calibration" in labels[0]  # best match first
    assert _graph(inline_api, agent_id=agent, q="zeppelin")["nodes"] == []

    tom = _graph(inline_api, agent_id=agent, entity="tom", depth=0)
    entity = [n for n in tom["nodes"] if n["kind"] == "entity" and n["label"] == "Tom"]
    assert entity
    units = {n["id"] for n in tom["nodes"] if n["kind"] == "unit"}
    mentions = {e["source"] for e in tom["edges"] if e["target"] == entity[0]["id"]}
    assert units and units == mentions
    by_id = _graph(inline_api, agent_id=agent, entity=entity[0]["id"], depth=0)
    assert {n["id"] for n in by_id["nodes"]} == {n["id"] for n in tom["nodes"]}
    missing = inline_api.get("/api/graph", params={"agent_id": agent, "entity": "Nobody"})
    assert missing.status_code == 404


def test_depth_reaches_linked_units(inline_api: Any, agent: str) -> None:
    seeds = _graph(inline_api, agent_id=agent, q="kilograms", depth=0)
    wider = _graph(inline_api, agent_id=agent, q="kilograms", depth=2)
    count = sum(n["kind"] == "unit" for n in seeds["nodes"])
    assert sum(n["kind"] == "unit" for n in wider["nodes"]) > count


def test_graph_is_gzip_compressed(inline_api: Any, agent: str) -> None:
    url = str(inline_api.base_url.join("/api/graph"))
    raw = inline_api.get(url, params={"agent_id": agent}, headers={"Accept-Encoding": "gzip"})
    assert raw.headers.get("content-encoding") == "gzip"
    plain = inline_api.get(url, params={"agent_id": agent}, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert raw.json() == plain.json()
    assert len(gzip.compress(plain.content)) < len(plain.content)


def test_memory_detail_is_the_full_row(inline_api: Any, agent: str) -> None:
    graph = _graph(inline_api, agent_id=agent, q="Acme arm", depth=0)
    unit = next(n for n in graph["nodes"] if n["kind"] == "unit")
    response = inline_api.get(f"/api/agents/{agent}/memories/{unit['id']}")
    assert response.status_code == 200, response.text
    memory = response.json()
    assert memory["text"].startswith(unit["label"]) and memory["document_id"] == "workshop"
    assert memory["embedded"] and memory["links"] and memory["entities"]
    assert {"name", "entity_type", "id"} <= set(memory["entities"][0])
    assert inline_api.get(f"/api/agents/{agent}/memories/{uuid.uuid4()}").status_code == 404
    other = inline_api.get(f"/api/agents/other-agent/memories/{unit['id']}")
    assert other.status_code == 404


def test_tenants_see_only_their_own_graph(auth_api: Any) -> None:  # noqa: F811
    a, b = make_tenant(auth_api, "grapha"), make_tenant(auth_api, "graphb")
    _ingest(auth_api, "shared-name", a.headers)
    mine = auth_api.get("/api/graph", params={"agent_id": "shared-name"}, headers=a.headers)
    assert mine.status_code == 200 and mine.json()["nodes"]
    theirs = auth_api.get("/api/graph", params={"agent_id": "shared-name"}, headers=b.headers)
    assert theirs.status_code == 200 and theirs.json()["nodes"] == []
    unit = next(n for n in mine.json()["nodes"] if n["kind"] == "unit")
    path = f"/api/agents/shared-name/memories/{unit['id']}"
    assert auth_api.get(path, headers=a.headers).status_code == 200
    assert auth_api.get(path, headers=b.headers).status_code == 404
    assert auth_api.get("/api/graph", params={"agent_id": "shared-name"}).status_code == 401
    sizes = auth_api.get("/api/graph/agents", headers=a.headers).json()["agents"]
    assert [s["agent_id"] for s in sizes] == ["shared-name"] and sizes[0]["memories"] > 0
    assert auth_api.get("/api/graph/agents", headers=b.headers).json()["agents"] == []


def test_ui_is_served_from_the_package(inline_api: Any) -> None:
    page = inline_api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/ui/app.js">' in page.text
    script = inline_api.get("/ui/app.js", headers={"Accept-Encoding": "gzip"})
    assert script.status_code == 200 and script.headers["content-encoding"] == "gzip"
    assert "cytoscape" in script.text
    assert inline_api.get("/ui/app.css").status_code == 200
    assert inline_api.get("/ui/missing.js").status_code == 404
