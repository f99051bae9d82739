"""Validity windows (issue 26) through the real apps and PostgreSQL: a supersede closes the old
fact's window and records both texts and the decider, restore reopens it; search, recall and
think with `as_of` see what was true then; a question about a past period finds the fact that
held in it; default search keeps showing what is true now."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.lifecycle.memory import CONFLICT_MARKER
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from tests.fakes import FakeOpenAI, Reply

pytestmark = pytest.mark.integration


def _query_client(settings: Settings, pool: Any, pipeline: Any) -> Any:
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.query_app import create_app

    return TestClient(create_app(settings, pool=pool, backend=InlineBackend(pipeline)))


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    with _query_client(settings, pool, pipeline) as client:
        yield client


@pytest.fixture()
def llm_query_api(llm_settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    with _query_client(llm_settings, pool, pipeline) as client:
        yield client


def _remember(api: Any, agent: str, content: str) -> dict[str, Any]:
    r = api.post(f"/api/agents/{agent}/remember", json={"content": content})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _search(api: Any, agent: str, query: str, **extra: Any) -> dict[str, Any]:
    r = api.post("/api/search", json={"agent_id": agent, "query": query, "trace": True, **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _texts(body: dict[str, Any]) -> list[str]:
    return [h["text"] for h in body["results"]]


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _between(a: str, b: str) -> str:
    start, end = datetime.fromisoformat(a), datetime.fromisoformat(b)
    return (start + (end - start) / 2).isoformat()


def test_supersede_closes_the_window_and_as_of_sees_the_old_fact(
    query_api: Any, inline_api: Any, agent_id: str
) -> None:
    lisbon = _remember(query_api, agent_id, "Priya lives in Lisbon.")
    berlin = _remember(query_api, agent_id, "Priya lives in Berlin.")
    assert berlin["decision"] == "SUPERSEDE" and berlin["superseded_id"] == lisbon["memory_id"]

    old = inline_api.get(f"/api/agents/{agent_id}/memories/{lisbon['memory_id']}").json()
    new = inline_api.get(f"/api/agents/{agent_id}/memories/{berlin['memory_id']}").json()
    assert old["status"] == "superseded" and old["valid_until"] is not None
    assert _at(old["valid_from"]) < _at(old["valid_until"]) == _at(new["valid_from"])
    assert new["valid_until"] is None
    event = old["history"][-1]
    assert event["event"] == "superseded" and event["related_id"] == berlin["memory_id"]
    assert event["details"]["old_text"] == "Priya lives in Lisbon."
    assert event["details"]["new_text"] == "Priya lives in Berlin."
    assert event["details"]["decided_by"] == "rules" and event["reason"]
    assert _at(event["details"]["valid_until"]) == _at(old["valid_until"])

    # default: what is true now; the trace says no window applied
    now = _search(query_api, agent_id, "Where does Priya live?")
    assert _texts(now)[0] == "Priya lives in Berlin."
    assert "Priya lives in Lisbon." not in _texts(now)
    assert now["trace"]["as_of"]["applied"] is False and "history" not in now["trace"]["paths"]

    # as_of in the Lisbon period: Lisbon, and not Berlin (learned later)
    then = _between(old["valid_from"], old["valid_until"])
    past = _search(query_api, agent_id, "Where does Priya live?", as_of=then)
    assert _texts(past) == ["Priya lives in Lisbon."]
    assert past["trace"]["as_of"]["applied"] is True
    assert past["trace"]["as_of"]["source"] == "as_of"
    assert [p["id"] for p in past["trace"]["paths"]["history"]["results"]] == [old["id"]]
    # as_of after the change: Berlin only; before anything was known: nothing
    later = _search(query_api, agent_id, "Where does Priya live?", as_of=new["valid_from"])
    assert _texts(later) == ["Priya lives in Berlin."]
    before = _search(query_api, agent_id, "Priya", as_of="2001-01-01T00:00:00Z")
    assert before["results"] == []

    recalled = query_api.post(
        f"/api/agents/{agent_id}/recall", json={"query": "Where does Priya live?", "as_of": then}
    ).json()["memories"]
    assert [m["text"] for m in recalled] == ["Priya lives in Lisbon."]

    # restore undoes the supersede: the window is open again, and recorded
    r = query_api.post(f"/api/agents/{agent_id}/memories/{lisbon['memory_id']}/restore")
    assert r.status_code == 200 and r.json()["restored"] is True
    back = inline_api.get(f"/api/agents/{agent_id}/memories/{lisbon['memory_id']}").json()
    assert back["status"] == "active" and back["valid_until"] is None
    assert back["history"][-1]["event"] == "restored"
    assert _at(back["history"][-1]["details"]["valid_until_cleared"]) == _at(old["valid_until"])
    assert "Priya lives in Lisbon." in _texts(
        _search(query_api, agent_id, "Where does Priya live?")
    )


def test_a_question_about_a_past_period_finds_what_was_true_then(
    query_api: Any, inline_api: Any, agent_id: str
) -> None:
    said = {"content": "Priya lives in Lisbon.", "event_date": "2023-03-01T10:00:00Z"}
    r = inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": [said]})
    assert r.status_code in (200, 201, 202), r.text
    moved = _remember(query_api, agent_id, "Priya lives in Berlin.")
    assert moved["decision"] == "SUPERSEDE"
    old = inline_api.get(f"/api/agents/{agent_id}/memories/{moved['superseded_id']}").json()
    assert old["valid_from"].startswith("2023-03-01") and old["valid_until"] is not None

    assert "Priya lives in Lisbon." not in _texts(
        _search(query_api, agent_id, "Where does Priya live?")
    )
    scoped = _search(query_api, agent_id, "Where did Priya live in 2023?")
    assert "Priya lives in Lisbon." in _texts(scoped)
    assert scoped["trace"]["as_of"] == {
        "applied": True,
        "source": "query",
        "start": "2023-01-01T00:00:00+00:00",
        "end": "2024-01-01T00:00:00+00:00",
    }
    # a period when Lisbon no longer held does not bring it back
    assert "Priya lives in Lisbon." not in _texts(
        _search(query_api, agent_id, "Where did Priya live in 2001?")
    )
    # as_of inside the old window, with the client's time zone
    then = _search(query_api, agent_id, "Where does Priya live?", as_of="2024-06-01T12:00:00+02:00")
    assert _texts(then) == ["Priya lives in Lisbon."]


def test_as_of_must_be_a_time(query_api: Any, agent_id: str) -> None:
    for path, body in (
        ("/api/search", {"agent_id": agent_id, "query": "q", "as_of": "last tuesday-ish"}),
        (f"/api/agents/{agent_id}/recall", {"query": "q", "as_of": "not a time"}),
    ):
        r = query_api.post(path, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"]


def test_think_as_of_answers_from_the_old_fact_and_the_llm_decider_is_recorded(
    llm_query_api: Any, inline_api: Any, fake_llm: FakeOpenAI, llm_settings: Settings,
    agent_id: str,
) -> None:  # fmt: skip
    lisbon = _remember(llm_query_api, agent_id, "Priya lives in Lisbon.")
    berlin = _remember(llm_query_api, agent_id, "Priya lives in Berlin now.")
    assert berlin["decision"] == "SUPERSEDE" and berlin["decided_by"] == "rules"  # sure: no LLM
    old = inline_api.get(f"/api/agents/{agent_id}/memories/{lisbon['memory_id']}").json()

    # a change the rules do not read with certainty is the LLM's; the audit names its model
    cars = f"{agent_id}-cars"
    toyota = _remember(llm_query_api, cars, "Priya drives a red Toyota.")
    fake_llm.script(Reply({"decision": "SUPERSEDE", "memory": 1, "reason": "new car"}),
                    when=CONFLICT_MARKER)  # fmt: skip
    tesla = _remember(llm_query_api, cars, "Priya's garage now holds a blue Tesla instead.")
    assert tesla["decision"] == "SUPERSEDE" and tesla["decided_by"] == "llm"
    car = inline_api.get(f"/api/agents/{cars}/memories/{toyota['memory_id']}").json()
    event = car["history"][-1]
    model = llm_settings.llm_background_model or llm_settings.llm_model
    assert event["details"]["decided_by"] == f"llm:{model}" and event["reason"] == "new car"
    assert car["valid_until"] is not None

    for when in (_between(old["valid_from"], old["valid_until"]), None):
        fake_llm.script(Reply("Priya's city."), when=THINK_MARKER)
        fake_llm.script(Reply({"opinions": []}), when=OPINION_MARKER)
        body = {"agent_id": agent_id, "query": "Where does Priya live?", "as_of": when}
        r = llm_query_api.post("/api/think", json=body)
        assert r.status_code == 200, r.text
        prompt = fake_llm.requests_matching(THINK_MARKER)[-1].content_of("user")
        world = [f["text"] for f in r.json()["based_on"]["world"]]
        if when is not None:
            assert world == ["Priya lives in Lisbon."] and "Lisbon" in prompt
            assert "Berlin" not in prompt
        else:
            assert "Priya lives in Lisbon." not in world and "Berlin" in prompt
