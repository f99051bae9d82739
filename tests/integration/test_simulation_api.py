"""Pre-seeding and episodic capture through the write API and the real pipeline (inline):
idempotent seeds, a changed character replacing only its own documents, category filters
returning only the agent's own category, dialogue searchable with its turn, tenancy."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from tests.unit.test_seeding import CAST

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


def _cast(suffix: str) -> dict[str, Any]:
    cast = copy.deepcopy(CAST)
    for c in cast["characters"]:
        c["agent_id"] += suffix
    for k in cast["knowledge"]:
        k["agent_id"] += suffix
    return cast


def _seed(api: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/api/seed", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    for doc in result["documents"]:
        if doc["operation_id"]:
            op = api.get(f"/api/operations/{doc['operation_id']}").json()
            assert op["status"] == "completed", op
    return result


def _search(api: TestClient, agent: str, query: str, filters: dict[str, Any]) -> list[Any]:
    body = {"agent_id": agent, "query": query, "filters": filters, "top_k": 10}
    response = api.post("/api/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()["results"]  # type: ignore[no-any-return]


def test_seed_is_idempotent_and_replaces_only_what_changed(
    inline_api: TestClient, agent_id: str
) -> None:
    cast = _cast(f"-{agent_id}")
    alex, jordan = (c["agent_id"] for c in cast["characters"])
    first = _seed(inline_api, cast)
    assert first["counts"] == {"created": len(first["documents"])}
    again = _seed(inline_api, cast)
    assert again["counts"] == {"unchanged": len(first["documents"])}

    cast["characters"][0]["communication_style"] = "Long, careful sentences."
    cast["characters"][0]["description"] = "Calm now."
    changed = _seed(inline_api, cast)
    replaced = {(d["agent_id"], d["document_id"]) for d in changed["documents"]
                if d["status"] == "replaced"}  # fmt: skip
    assert replaced == {
        (alex, "seed:dinner:self:communication"),
        (alex, "seed:dinner:self:identity"),
        (jordan, f"seed:dinner:about:{alex}"),  # what Jordan knows of Alex
    }
    cast["characters"][0]["skills"] = []
    dropped = _seed(inline_api, cast)
    assert [(d["document_id"], d["status"]) for d in dropped["documents"]
            if d["status"] != "unchanged"] == [("seed:dinner:self:skills", "deleted")]  # fmt: skip


def test_category_filters_return_only_the_agents_own_category(
    inline_api: TestClient, query_api: TestClient, agent_id: str
) -> None:
    cast = _cast(f"-{agent_id}")
    alex, jordan = (c["agent_id"] for c in cast["characters"])
    _seed(inline_api, cast)
    for category in ("identity", "background", "communication", "traits"):
        found = _search(query_api, alex, "who am I?", {"type": "character", "category": category})
        assert found and {r["metadata"]["category"] for r in found} == {category}
        assert {r["metadata"]["character"] for r in found} == {"Alex"}
    scene = _search(query_api, jordan, "where am I?", {"type": "scene"})
    assert {r["metadata"]["category"] for r in scene} == {
        "location",
        "atmosphere",
        "time",
        "context",
    }
    about = _search(
        query_api, jordan, "who is Alex?", {"type": "character_knowledge", "about": "Alex"}
    )
    assert {r["text"] for r in about} == {
        "Alex, a pragmatic project manager. Organised and direct.",
        "Alex hates olives.",
    }


def test_episodes_reach_every_listener_once(
    inline_api: TestClient, query_api: TestClient, agent_id: str
) -> None:
    listeners = [f"{agent_id}-a", f"{agent_id}-b"]
    lines = [
        ("Alice", "I love Italian food, especially lasagne."),
        ("Bob", "I would rather get sushi."),
        ("Alice", "Fine, sushi on Friday then."),
    ]
    for turn, (speaker, text) in enumerate(lines, 1):
        body = {"scene": "dinner", "turn": turn, "speaker": speaker, "text": text,
                "listeners": listeners}  # fmt: skip
        response = inline_api.post("/api/episodes", json=body)
        assert response.status_code == 200, response.text
        assert [m["status"] for m in response.json()["memories"]] == ["created", "created"]
    repeat = inline_api.post("/api/episodes", json=body).json()
    assert [m["status"] for m in repeat["memories"]] == ["unchanged", "unchanged"]

    found = _search(query_api, listeners[1], "what did Alice say about food?", {"type": "episodic"})
    assert found[0]["text"] == "Alice said: I love Italian food, especially lasagne."
    assert (
        found[0]["metadata"].items() >= {"turn": 1, "speaker": "Alice", "scene": "dinner"}.items()
    )
    late = _search(query_api, listeners[0], "sushi", {"type": "episodic", "turn": {"gte": 3}})
    assert [r["metadata"]["turn"] for r in late] == [3]


def test_a_batch_of_lines_is_captured_as_its_lines_one_by_one(
    inline_api: TestClient, query_api: TestClient, agent_id: str
) -> None:
    """Seed 001's episodic capture of several lines in one request: the same memories as the
    lines sent one at a time, in one transaction; the batch again changes nothing."""
    listeners = [f"{agent_id}-a", f"{agent_id}-b"]
    lines = [
        {"turn": 1, "speaker": "Alice", "text": "I love Italian food, especially lasagne."},
        {"turn": 2, "speaker": "Bob", "text": "I would rather get sushi."},
        {"turn": 3, "speaker": "Alice", "text": "Fine, sushi on Friday then.",
         "event_date": "2026-11-24T19:05:00Z"},
    ]  # fmt: skip
    body = {"scene": "dinner", "listeners": listeners, "lines": lines}
    response = inline_api.post("/api/episodes/batch", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert [(a["turn"], a["speaker"]) for a in answer["lines"]] == [(1, "Alice"), (2, "Bob"),
                                                                    (3, "Alice")]  # fmt: skip
    for line in answer["lines"]:
        assert [m["agent_id"] for m in line["memories"]] == listeners
        assert {m["status"] for m in line["memories"]} == {"created"}
        assert line["memories"][0]["document_id"] == (
            f"episode:dinner:{line['turn']}:{line['speaker']}"
        )
    again = inline_api.post("/api/episodes/batch", json=body).json()
    assert {m["status"] for line in again["lines"] for m in line["memories"]} == {"unchanged"}
    # a line sent alone afterwards is the same memory
    single = {"scene": "dinner", "listeners": listeners, **lines[1]}
    alone = inline_api.post("/api/episodes", json=single).json()
    assert [m["status"] for m in alone["memories"]] == ["unchanged", "unchanged"]

    found = _search(query_api, listeners[1], "sushi", {"type": "episodic", "turn": {"gte": 3}})
    assert [r["text"] for r in found] == ["Alice said: Fine, sushi on Friday then."]


@pytest.mark.parametrize(
    "body",
    [
        {"scene": "s", "listeners": ["a"], "lines": []},
        {"scene": "s", "listeners": ["a"], "lines": [{"turn": 1, "speaker": "A", "text": " "}]},
        {"scene": "s", "listeners": ["a"], "lines": [
            {"turn": 1, "speaker": "A", "text": "x"}, {"turn": 1, "speaker": "A", "text": "y"}]},
        {"scene": "s", "listeners": [f"l{i}" for i in range(30)], "lines": [
            {"turn": t, "speaker": "A", "text": "x"} for t in range(200)]},
    ],
)  # fmt: skip
def test_bad_batches_are_422_and_write_nothing(
    inline_api: TestClient, agent_id: str, body: dict[str, Any]
) -> None:
    body = {**body, "listeners": [f"{agent_id}-{n}" for n in body["listeners"]]}
    response = inline_api.post("/api/episodes/batch", json=body)
    assert response.status_code == 422, response.text
    listed = inline_api.get(f"/api/agents/{body['listeners'][0]}/documents")
    assert listed.status_code in (200, 404) and not listed.json().get("documents")


@pytest.mark.parametrize(
    "body",
    [
        {"scene": "s", "turn": -1, "speaker": "A", "text": "x", "listeners": ["a"]},
        {"scene": "s", "turn": 1, "speaker": "A", "text": "  ", "listeners": ["a"]},
        {"scene": "s", "turn": 1, "speaker": "A", "text": "x", "listeners": []},
        {"scene": "s", "turn": 1, "speaker": "A", "text": "x", "listeners": ["bad id!"]},
    ],
)
def test_bad_episodes_are_422(inline_api: TestClient, body: dict[str, Any]) -> None:
    response = inline_api.post("/api/episodes", json=body)
    assert response.status_code == 422, response.text
