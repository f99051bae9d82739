"""Conversation search over raw messages, kept in sync through edits and deletes (seed 002 §7),
on real PostgreSQL + pgvector with the pipeline run inline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.config import Settings

pytestmark = pytest.mark.integration

TRIP = [
    {"message_id": "m1", "role": "user", "event_date": "2024-05-01T09:00:00Z",
     "content": "I am planning a trip to Kyoto in the autumn and I would love to see the "
                "temples and the maple leaves turning red along the Philosopher's Path."},
    {"message_id": "m2", "role": "assistant", "event_date": "2024-05-01T09:01:00Z",
     "content": "Kyoto in November is wonderful: Tofuku-ji and Eikan-do are famous for their "
                "autumn colours, and the Philosopher's Path is lovely in the early morning."},
    {"message_id": "m3", "role": "user", "event_date": "2024-05-01T09:02:00Z",
     "content": "My sister Hanna is allergic to peanuts, so we must be careful with street "
                "food and ask about the ingredients of every sauce we order."},
    {"message_id": "m4", "role": "assistant", "event_date": "2024-05-01T09:03:00Z",
     "content": "Good to know. Many Japanese sauces contain sesame rather than peanuts, but "
                "carry a card in Japanese that explains the allergy to the restaurant staff."},
]  # fmt: skip
SHORT = [
    {"message_id": "s1", "role": "user", "content": "ok"},
    {"message_id": "s2", "role": "assistant", "content": "Great, anything else?"},
    {"message_id": "s3", "role": "user", "content": "Book the ryokan in Gion please"},
]


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


def ingest(api: Any, agent_id: str, items: list[dict[str, Any]], doc: str = "trip",
           title: str | None = "Kyoto trip") -> dict[str, Any]:  # fmt: skip
    body = {"agent_id": agent_id, "document_id": doc, "items": items, "title": title}
    response = api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    op = api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed", op
    return op


def search(api: TestClient, agent_id: str, query: str, **extra: Any) -> list[dict[str, Any]]:
    response = api.post(
        "/api/conversation_search", json={"agent_id": agent_id, "query": query, **extra}
    )
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_search_finds_the_message_with_its_conversation(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    op = ingest(inline_api, agent_id, TRIP)
    assert op["counts"]["chunks_written"] == 4
    results = search(query_api, agent_id, "peanut allergy", min_score=0.0)
    top = results[0]
    assert top["message_id"] in {"m3", "m4"}
    assert top["conversation_id"] == "trip" and top["conversation_title"] == "Kyoto trip"
    assert top["role"] in {"user", "assistant"} and top["timestamp"].startswith("2024-05-01")
    assert "peanut" in top["snippet"]
    assert len({r["message_id"] for r in results}) == len(results)  # one result per message
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
