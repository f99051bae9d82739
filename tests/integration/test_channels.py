"""Channels (seed 002 §7.3, issue 57): where a message was said, given per item or per request,
kept with the conversation's messages and chunks and in the memories' metadata; conversation
search and memory search keep to a channel. Through real Celery workers (the local extractor)
and the query service's routes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from tests.conftest import wait_until

pytestmark = pytest.mark.integration

# Two conversations about the same trip, one said in Teams, one on the web (written for this).
STANDUP = [
    ("Maya", "user", "I booked the flights to Lisbon for the conference in June."),
    ("Leo", "assistant", "Lisbon in June is lovely, do you need a hotel near the venue?"),
    ("Maya", "user", "Yes please, something walkable from the Lisbon congress centre."),
]
SUPPORT = [
    ("Maya", "user", "My Lisbon hotel booking shows the wrong dates."),
    ("Leo", "assistant", "I can move the Lisbon booking to the conference week for you."),
]


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


def _items(turns: list[tuple[str, str, str]], prefix: str) -> list[dict[str, Any]]:
    return [
        {"message_id": f"{prefix}{i}", "speaker": who, "role": role, "content": text,
         "event_date": f"2024-03-0{i + 1}T10:00:00Z"}
        for i, (who, role, text) in enumerate(turns)
    ]  # fmt: skip


def _completed(api: Any, body: dict[str, Any]) -> None:
    path = f"/api/operations/{body['operation_id']}"
    status = wait_until(
        lambda: (s := api.get(path).json()["status"]) in ("completed", "failed") and s, 120
    )
    assert status == "completed", api.get(path).json()


@pytest.fixture(scope="module")
def stored(celery_api: Any) -> str:
    """One agent: the stand-up posted whole with the request's channel (one item naming its
    own), the support chat appended with its messages' own channel."""
    agent = "channels-agent"
    items = _items(STANDUP, "s")
    items[2]["channel"] = "console"
    posted = celery_api.post(
        "/api/memories/batch",
        json={"agent_id": agent, "document_id": "standup", "channel": "teams", "items": items},
    )
    assert posted.status_code == 200, posted.text
    support = [{**m, "channel": "web"} for m in _items(SUPPORT, "w")]
    path = f"/api/agents/{agent}/conversations/support/messages"
    first = celery_api.post(path, json={"messages": support[:1]})
    second = celery_api.post(path, json={"messages": support[1:]})
    for body in (posted.json(), first.json(), second.json()):
        _completed(celery_api, body)
    return agent


def _conversation_hits(query_api: TestClient, agent: str, **extra: Any) -> set[tuple[str, str]]:
    """(message id, channel) of every message the results cover (short messages of one
    channel share a chunk, attributed to its first)."""
    body = {"agent_id": agent, "query": "Lisbon booking", "limit": 20, "min_score": 0, **extra}
    response = query_api.post("/api/conversation_search", json=body)
    assert response.status_code == 200, response.text
    return {(m, h["channel"]) for h in response.json()["results"] for m in h["message_ids"]}


def test_conversation_search_keeps_to_a_channel(stored: str, query_api: TestClient) -> None:
    assert _conversation_hits(query_api, stored) == {
        ("s0", "teams"), ("s1", "teams"), ("s2", "console"), ("w0", "web"), ("w1", "web"),
    }  # fmt: skip
    teams = _conversation_hits(query_api, stored, channel="teams")
    assert teams == {("s0", "teams"), ("s1", "teams")}
    assert _conversation_hits(query_api, stored, channel="web") == {("w0", "web"), ("w1", "web")}
    either = _conversation_hits(query_api, stored, channel=["web", "console"])
    assert either == {("s2", "console"), ("w0", "web"), ("w1", "web")}
    assert _conversation_hits(query_api, stored, channel="slack") == set()


def test_memory_search_keeps_to_a_channel(stored: str, query_api: TestClient) -> None:
    def found(**extra: Any) -> list[dict[str, Any]]:
        body = {"agent_id": stored, "query": "Lisbon hotel booking", "top_k": 50, **extra}
        response = query_api.post("/api/search", json=body)
        assert response.status_code == 200, response.text
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    everything = found()
    assert {r["metadata"]["channel"] for r in everything} == {"teams", "console", "web"}
    web = found(channel="web")
    assert web and {r["metadata"]["channel"] for r in web} == {"web"}
    assert {r["id"] for r in web} == {
        r["id"] for r in everything if r["metadata"]["channel"] == "web"
    }
    # the same as the metadata filter it stands for
    assert {r["id"] for r in found(filters={"channel": "web"})} == {r["id"] for r in web}
    assert {r["metadata"]["channel"] for r in found(channel=["teams", "console"])} == {
        "teams", "console",
    }  # fmt: skip


def test_the_channel_stays_with_the_stored_items(stored: str, celery_api: Any) -> None:
    items = celery_api.get(f"/api/agents/{stored}/documents/standup").json()["items"]
    assert [i.get("channel") for i in items] == ["teams", "teams", "console"]


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("/api/memories/batch",
         {"agent_id": "channels-bad", "items": [{"content": "x", "channel": "c" * 65}]},
         "channel"),
        ("/api/memories/batch",
         {"agent_id": "channels-bad",
          "items": [{"content": "x", "channel": "web", "metadata": {"channel": "teams"}}]},
         "channel and metadata.channel differ"),
        ("/api/memories/batch",
         {"agent_id": "channels-bad", "items": [{"content": "x", "metadata": {"channel": 3}}]},
         "metadata.channel"),
        ("/api/agents/channels-bad/conversations/c/messages",
         {"messages": [{"message_id": "m", "role": "user", "content": "x"}], "channel": ""},
         "channel"),
    ],
)  # fmt: skip
def test_a_bad_channel_is_refused_and_nothing_is_stored(
    celery_api: Any, path: str, body: dict[str, Any], words: str
) -> None:
    response = celery_api.post(path, json=body)
    assert response.status_code == 422, response.text
    assert words in response.text
    listed = celery_api.get("/api/agents/channels-bad/documents")
    assert listed.status_code == 404 or listed.json()["documents"] == [], listed.text


def test_a_search_channel_must_agree_with_its_filter(query_api: TestClient) -> None:
    body = {"agent_id": "x", "query": "q", "channel": "web", "filters": {"channel": "teams"}}
    response = query_api.post("/api/search", json=body)
    assert response.status_code == 422, response.text
    assert "channel and filters.channel differ" in response.text
