"""POST /api/think on the query service, with the fake LLM server and the real read path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from memora.basics.config import Settings
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from tests.fakes import Fail, FakeOpenAI, Reply

pytestmark = pytest.mark.integration
FACTS = [
    {
        "content": "Alice works at Google as a software engineer.",
        "event_date": "2024-01-15T10:00:00Z",
    },
    {
        "content": "Alice says remote work lets her focus on deep work.",
        "event_date": "2024-01-16T10:00:00Z",
    },
    {
        "content": "Assistant: I recommended noise-cancelling headphones to Alice.",
        "event_date": "2024-01-17T10:00:00Z",
    },
]
OPINION = {
    "statement": "Remote work improves productivity for focused engineers",
    "reasons": ["fewer interruptions", "no commute"],
    "confidence": 0.8,
    "updates": None,
    "stance": "new",
}


def _query_client(settings: Settings, pool: Any, pipeline: Any) -> Any:
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.query_app import create_app

    # opinions stored inline instead of via Celery
    app = create_app(settings, pool=pool, backend=InlineBackend(pipeline))
    return TestClient(app)


@pytest.fixture()
def think_api(llm_settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    with _query_client(llm_settings, pool, pipeline) as client:
        yield client


@pytest.fixture()
def think_api_without_llm(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    with _query_client(settings, pool, pipeline) as client:
        yield client


def _stored(pool: Any, agent_id: str) -> dict[str, int]:
    with pool.connection() as conn:
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT (SELECT count(*) FROM agents WHERE agent_id = %(a)s) AS agents, "
            "(SELECT count(*) FROM operations WHERE agent_id = %(a)s) AS operations, "
            "(SELECT count(*) FROM memory_units "
            " WHERE agent_id = %(a)s AND fact_type = 'opinion') AS opinions",
            {"a": agent_id},
        ).fetchone()


def test_think_without_llm_is_503_and_stores_nothing(
    think_api_without_llm: Any, pool: Any, agent_id: str
) -> None:
    response = think_api_without_llm.post(
        "/api/think", json={"agent_id": agent_id, "query": "Remote work?"}
    )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "llm_not_configured"
    assert _stored(pool, agent_id) == {"agents": 0, "operations": 0, "opinions": 0}


def test_think_rejects_bad_requests(think_api: Any) -> None:
    assert think_api.post("/api/think", json={"agent_id": "a", "query": ""}).status_code == 422
    assert (
        think_api.post("/api/think", json={"agent_id": "a", "query": "q", "top_k": 0}).status_code
        == 422
    )


def test_think_answers_from_memories_and_its_opinions_are_found_later(
    inline_api: Any, think_api: Any, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": FACTS})
    personality = {"openness": 0.9, "conscientiousness": 0.1, "bias_strength": 0.9}
    inline_api.put(
        f"/api/agents/{agent_id}", json={"personality": personality, "background": "I am a coach."}
    )
    fake_llm.script(Reply("I think remote work is great for Alice."), when=THINK_MARKER)
    fake_llm.script(Reply({"opinions": [OPINION]}), when=OPINION_MARKER)
    query = {
        "agent_id": agent_id,
        "query": "What do you think about remote work for Alice?",
        "thinking_budget": 50,
    }
    response = think_api.post("/api/think", json=query)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["text"] == "I think remote work is great for Alice."
    assert set(body["based_on"]) == {"world", "agent", "opinion"}  # no reflection made yet
    world_texts = " ".join(f["text"] for f in body["based_on"]["world"])
    assert "remote work" in world_texts
    assert any("headphones" in f["text"] for f in body["based_on"]["agent"])
    assert [o["statement"] for o in body["new_opinions"]] == [OPINION["statement"]]
    assert body["opinion_error"] is None and body["opinions_operation_id"]
    # what the answer cost: its two calls (the answer, the opinions) with the tokens the
    # provider counted (the fake: a token per 4 characters of the prompt and of the reply)
    prompt = fake_llm.requests_matching(THINK_MARKER)[0]
    assert body["usage"]["requests"] == 2
    assert body["usage"]["prompt_tokens"] > len(prompt.prompt) // 4
    assert body["usage"]["completion_tokens"] >= len(body["text"]) // 4
    assert "- very high openness to new ideas" in prompt.content_of("user")
    assert "- very low conscientiousness and organization" in prompt.content_of("user")
    assert "Personality influence strength: 90%" in prompt.content_of("user")
    assert "Don't be afraid to be biased" in prompt.content_of("system")
    assert "I am a coach." in prompt.content_of("user")
    assert "MY REFLECTIONS" not in prompt.content_of("user")

    op = inline_api.get(f"/api/operations/{body['opinions_operation_id']}").json()
    assert op["status"] == "completed" and op["kind"] == "opinions"
    search = think_api.post(
        "/api/search",
        json={"agent_id": agent_id, "query": "remote work productivity", "fact_type": ["opinion"]},
    ).json()["results"]
    assert any(OPINION["statement"] in r["text"] and r["fact_type"] == "opinion" for r in search)
    if any(getattr(r, "path", "") == "/api/opinion_search" for r in think_api.app.routes):
        found = think_api.post(
            "/api/opinion_search", json={"agent_id": agent_id, "query": "remote work"}
        ).json()
        assert any(OPINION["statement"] in r["text"] for r in found["results"])

    # the next think sees the opinion among its existing beliefs, with its confidence
    fake_llm.script(Reply("Still convinced."), when=THINK_MARKER)
    fake_llm.script(Reply({"opinions": []}), when=OPINION_MARKER)
    again = think_api.post("/api/think", json=query).json()
    assert any(
        UUID(o["id"]) and o["confidence"] == pytest.approx(0.8)
        for o in again["based_on"]["opinion"]
    )
    beliefs = (
        fake_llm.requests_matching(THINK_MARKER)[-1]
        .content_of("user")
        .split("MY EXISTING OPINIONS")[1]
    )
    assert OPINION["statement"] in beliefs.split("Your personality traits")[0]
    assert again["opinions_operation_id"] is None


def test_think_answers_even_when_opinion_extraction_fails(
    inline_api: Any, think_api: Any, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": FACTS})
    fake_llm.script(Reply("An answer."), when=THINK_MARKER)
    fake_llm.always(Fail(429), when=OPINION_MARKER)
    response = think_api.post("/api/think", json={"agent_id": agent_id, "query": "Remote work?"})
    assert response.status_code == 200
    body = response.json()
    assert body["text"] == "An answer." and body["new_opinions"] == []
    assert "LLMUnavailable" in body["opinion_error"]
    assert _stored(pool, agent_id)["opinions"] == 0
    assert body["usage"]["requests"] > 2  # the refused attempts count: each was sent


@pytest.mark.parametrize(
    "answer", [Fail(500), Reply("late", delay=1.0)], ids=["http-500", "timeout"]
)
def test_unavailable_llm_is_503_and_stores_nothing(
    llm_settings: Settings,
    pool: Any,
    pipeline: Any,
    fake_llm: FakeOpenAI,
    agent_id: str,
    answer: Any,
) -> None:
    fake_llm.always(answer, when=THINK_MARKER)
    fast = llm_settings.model_copy(update={"llm_timeout_seconds": 0.3})
    with _query_client(fast, pool, pipeline) as think_api:
        response = think_api.post(
            "/api/think", json={"agent_id": agent_id, "query": "Remote work?"}
        )
    assert response.status_code == 503 and response.json()["error"]["code"] == "llm_unavailable"
    assert len(fake_llm.requests_matching(THINK_MARKER)) == 1 + fast.llm_max_retries
    assert _stored(pool, agent_id) == {"agents": 0, "operations": 0, "opinions": 0}
