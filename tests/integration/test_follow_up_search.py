"""POST /api/search with `follow_up`: the LLM (the fake server) plans a second round from the
first round's results, and the rounds are fused (memora.usecases.follow_up)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from memora.usecases.follow_up import FOLLOW_UP_MARKER
from tests.fakes import Fail, FakeOpenAI, Reply

pytestmark = pytest.mark.integration
FACTS = [
    "Caroline moved here from her home country four years ago.",
    "Caroline moved into a new apartment downtown last month.",
    "Caroline's friends helped her move the sofa upstairs.",
    "Caroline wears the necklace her grandma gave her back in Sweden.",
    "Caroline started a pottery class on Tuesdays.",
]
QUESTION = "Where did Caroline move from?"
BRIDGE = "Caroline grandma necklace Sweden"


def _query_client(settings: Settings, pool: Any, pipeline: Any) -> Any:
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.query_app import create_app

    return TestClient(create_app(settings, pool=pool, backend=InlineBackend(pipeline)))


@pytest.fixture()
def query_api(llm_settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    with _query_client(llm_settings, pool, pipeline) as client:
        yield client


@pytest.fixture()
def remembered(inline_api: Any, agent_id: str) -> str:
    items = [
        {"content": text, "event_date": f"2024-03-0{n}T10:00:00Z"}
        for n, text in enumerate(FACTS, 1)
    ]
    response = inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": items})
    assert response.status_code in (200, 202), response.json()
    return agent_id


def _search(api: Any, agent_id: str, **extra: Any) -> Any:
    body = {"agent_id": agent_id, "query": QUESTION, "top_k": 2, **extra}
    response = api.post("/api/search", json=body)
    assert response.status_code == 200, response.json()
    return response.json()


def test_the_follow_up_round_brings_up_the_other_hop(
    query_api: Any, fake_llm: FakeOpenAI, remembered: str
) -> None:
    plain = _search(query_api, remembered)
    assert plain["follow_up"] is None
    assert not any("Sweden" in r["text"] for r in plain["results"])

    fake_llm.script(Reply({"queries": [BRIDGE, QUESTION, BRIDGE]}), when=FOLLOW_UP_MARKER)
    body = _search(query_api, remembered, follow_up=True, trace=True)
    texts = [r["text"] for r in body["results"]]
    assert len(texts) == 2 and any("Sweden" in t for t in texts), texts
    assert plain["results"][0]["text"] in texts  # the first round's best stays
    # the question itself and repeats are not searched again
    assert body["follow_up"]["queries"] == [BRIDGE]
    usage = body["follow_up"]["usage"]
    assert usage["requests"] == 1 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    weights = [r["weight"] for r in body["results"]]
    assert weights == sorted(weights, reverse=True)
    followed = body["trace"]["follow_up"]
    assert followed["queries"] == [BRIDGE] and len(followed["rounds"]) == 2
    assert followed["selected"] == [r["id"] for r in body["results"]]
    # the LLM read the question and what the first round found, dated
    asked = fake_llm.requests_matching(FOLLOW_UP_MARKER)[-1].content_of("user")
    assert f"QUESTION: {QUESTION}" in asked
    assert plain["results"][0]["text"][:60] in asked and "(2024-03-0" in asked
    # a reference time reaches the LLM as when the question is asked
    fake_llm.script(Reply({"queries": []}), when=FOLLOW_UP_MARKER)
    _search(query_api, remembered, follow_up=True, reference_time="2024-04-01T12:00:00Z")
    asked = fake_llm.requests_matching(FOLLOW_UP_MARKER)[-1].content_of("user")
    assert f"QUESTION (asked on 2024-04-01): {QUESTION}" in asked


def test_no_follow_up_query_leaves_the_first_round(
    query_api: Any, fake_llm: FakeOpenAI, remembered: str
) -> None:
    plain = _search(query_api, remembered)
    fake_llm.script(Reply({"queries": []}), when=FOLLOW_UP_MARKER)
    body = _search(query_api, remembered, follow_up=True)
    assert [r["id"] for r in body["results"]] == [r["id"] for r in plain["results"]]
    assert body["follow_up"]["queries"] == [] and body["follow_up"]["usage"]["requests"] == 1


def test_follow_up_without_an_llm_is_503_and_plain_search_still_answers(
    settings: Settings, pool: Any, pipeline: Any, remembered: str
) -> None:
    with _query_client(settings, pool, pipeline) as api:
        refused = api.post(
            "/api/search", json={"agent_id": remembered, "query": QUESTION, "follow_up": True}
        )
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "llm_not_configured"
        assert _search(api, remembered)["results"]


def test_an_llm_that_fails_leaves_the_first_round_and_says_why(
    query_api: Any, fake_llm: FakeOpenAI, remembered: str
) -> None:
    plain = _search(query_api, remembered)
    fake_llm.always(Reply("no JSON here"), when=FOLLOW_UP_MARKER)
    body = _search(query_api, remembered, follow_up=True)
    assert [r["id"] for r in body["results"]] == [r["id"] for r in plain["results"]]
    assert body["follow_up"]["queries"] == []
    assert body["follow_up"]["error"]["code"] == "llm_invalid_output"
    assert body["follow_up"]["usage"]["requests"] >= 2  # the answer re-asked, then given up
    fake_llm.reset()
    fake_llm.always(Fail(500), when=FOLLOW_UP_MARKER)
    failed = _search(query_api, remembered, follow_up=True)["follow_up"]
    assert failed["error"]["code"] == "llm_unavailable" and failed["queries"] == []


def test_think_with_follow_up_answers_from_both_rounds(
    query_api: Any, fake_llm: FakeOpenAI, remembered: str
) -> None:
    fake_llm.always(Reply("From Sweden, I believe."), when=THINK_MARKER)
    fake_llm.always(Reply({"opinions": []}), when=OPINION_MARKER)
    body = {"agent_id": remembered, "query": QUESTION, "top_k": 2}

    def world(answer: Any) -> list[str]:
        return [e["text"] for e in answer["based_on"]["world"]]

    plain = query_api.post("/api/think", json=body).json()
    assert not any("Sweden" in t for t in world(plain)) and plain["usage"]["requests"] == 2
    fake_llm.script(Reply({"queries": [BRIDGE]}), when=FOLLOW_UP_MARKER)
    answer = query_api.post("/api/think", json={**body, "follow_up": True})
    assert answer.status_code == 200, answer.json()
    followed = answer.json()
    assert any("Sweden" in t for t in world(followed)) and len(world(followed)) == 2
    assert followed["usage"]["requests"] == 3  # the plan, the answer, the opinions
    assert "Sweden" in fake_llm.requests_matching(THINK_MARKER)[-1].content_of("user")
    planned_from = fake_llm.requests_matching(FOLLOW_UP_MARKER)[-1].content_of("user")
    assert world(plain)[0][:60] in planned_from


def test_at_most_the_configured_queries_are_searched(
    query_api: Any, fake_llm: FakeOpenAI, remembered: str
) -> None:
    planned = ["pottery class", "  Caroline   grandma  ", "sofa upstairs", "apartment downtown"]
    fake_llm.script(Reply({"queries": planned}), when=FOLLOW_UP_MARKER)
    body = _search(query_api, remembered, follow_up=True, trace=True)
    assert body["follow_up"]["queries"] == ["pottery class", "Caroline grandma"]  # 2: the default
    assert len(body["trace"]["follow_up"]["rounds"]) == 3
    assert "Write up to 2 short search queries" in fake_llm.requests[-1].content_of("system")
