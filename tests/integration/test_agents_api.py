"""Agent profiles on the write API: personality, validation, background merge (fake LLM)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.think.personality import MERGE_MARKER
from tests.fakes import Fail, FakeOpenAI, Reply

pytestmark = pytest.mark.integration


@pytest.fixture()
def llm_api(llm_settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    with TestClient(create_app(llm_settings, pool=pool, backend=InlineBackend(pipeline))) as client:
        yield client


def _agent_row(pool: Any, agent_id: str) -> dict[str, Any] | None:
    with pool.connection() as conn:
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT personality, background FROM agents WHERE agent_id = %s", (agent_id,)
        ).fetchone()


def test_profile_is_created_with_defaults_and_listed(inline_api: Any, agent_id: str) -> None:
    profile = inline_api.get(f"/api/agents/{agent_id}/profile")
    assert profile.status_code == 200
    body = profile.json()
    assert body["agent_id"] == agent_id and body["background"] == ""
    assert body["personality"] == {
        "openness": 0.5,
        "conscientiousness": 0.5,
        "extraversion": 0.5,
        "agreeableness": 0.5,
        "neuroticism": 0.5,
        "bias_strength": 0.5,
    }
    listed = inline_api.get("/api/agents").json()["agents"]
    mine = [a for a in listed if a["agent_id"] == agent_id]
    assert len(mine) == 1 and set(mine[0]) >= {
        "agent_id",
        "personality",
        "background",
        "created_at",
    }


def test_put_agent_and_profile_merge_personality(inline_api: Any, agent_id: str) -> None:
    created = inline_api.put(
        f"/api/agents/{agent_id}",
        json={"personality": {"openness": 0.8}, "background": "I am a creative engineer"},
    )
    assert created.status_code == 200
    assert created.json()["personality"]["openness"] == 0.8
    assert created.json()["background"] == "I am a creative engineer"
    updated = inline_api.put(
        f"/api/agents/{agent_id}/profile",
        json={"personality": {"conscientiousness": 0.6, "bias_strength": 1}},
    ).json()
    assert updated["personality"]["openness"] == 0.8  # kept
    assert updated["personality"]["conscientiousness"] == 0.6
    assert updated["personality"]["bias_strength"] == 1.0
    assert updated["background"] == "I am a creative engineer"
    background_only = inline_api.put(
        f"/api/agents/{agent_id}", json={"background": "I moved."}
    ).json()
    assert (
        background_only["personality"]["openness"] == 0.8
        and background_only["background"] == "I moved."
    )


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/profile", {"personality": {"openness": 1.5}}, "openness"),
        ("/profile", {"personality": {"bias_strength": -0.1}}, "bias_strength"),
        ("/profile", {"personality": {"charisma": 0.5}}, "charisma"),
        ("/profile", {"personality": {"neuroticism": "high"}}, "neuroticism"),
        ("/profile", {}, "personality"),
        ("", {"personality": {"agreeableness": 2}}, "agreeableness"),
    ],
)
def test_out_of_range_traits_are_rejected_with_json_422(
    inline_api: Any, pool: Any, agent_id: str, path: str, body: dict[str, Any], field: str
) -> None:
    response = inline_api.put(f"/api/agents/{agent_id}{path}", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert any(field in [str(p) for p in d["loc"]] for d in error["details"])
    assert _agent_row(pool, agent_id) is None  # nothing written


def test_background_merge_resolves_conflicts_in_first_person(
    llm_api: Any, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    llm_api.put(f"/api/agents/{agent_id}", json={"background": "I was born in Colorado."})
    merged = "I was born in Texas. I have 10 years of startup experience."
    fake_llm.script(Reply("{oops"), Reply({"background": merged}), when=MERGE_MARKER)
    response = llm_api.post(
        f"/api/agents/{agent_id}/background",
        json={"content": "You were born in Texas and have 10 years of startup experience."},
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {"background": merged}
    assert _agent_row(pool, agent_id)["background"] == merged  # type: ignore[index]
    first = fake_llm.requests[0]
    assert "Current background: I was born in Colorado." in first.content_of("user")
    assert "New information: You were born in Texas" in first.content_of("user")
    assert "FIRST PERSON" in first.content_of(
        "user"
    ) and "new information wins" in first.content_of("system")
    assert len(fake_llm.requests) == 2  # the invalid JSON was re-asked once


def test_background_merge_creates_the_agent(
    llm_api: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    fake_llm.script(Reply({"background": "I love sailing."}), when=MERGE_MARKER)
    response = llm_api.post(
        f"/api/agents/{agent_id}/background", json={"content": "You love sailing."}
    )
    assert response.json() == {"background": "I love sailing."}
    assert "Current background: (empty)" in fake_llm.requests[0].content_of("user")
    assert llm_api.get(f"/api/agents/{agent_id}/profile").json()["background"] == "I love sailing."


@pytest.mark.parametrize(
    ("answers", "status", "code"),
    [
        ([Fail(500)] * 3, 503, "llm_unavailable"),
        ([Fail(429)] * 3, 503, "llm_unavailable"),
        ([Reply({"background": "I " + "x" * 600})] * 2, 502, "llm_invalid_output"),
        ([Reply("not json")] * 2, 502, "llm_invalid_output"),
    ],
)
def test_failed_merge_changes_nothing(
    llm_api: Any,
    fake_llm: FakeOpenAI,
    pool: Any,
    agent_id: str,
    answers: list[Any],
    status: int,
    code: str,
) -> None:
    llm_api.put(f"/api/agents/{agent_id}", json={"background": "I was born in Colorado."})
    fake_llm.script(*answers, when=MERGE_MARKER)
    response = llm_api.post(
        f"/api/agents/{agent_id}/background", json={"content": "You were born in Texas."}
    )
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert _agent_row(pool, agent_id)["background"] == "I was born in Colorado."  # type: ignore[index]
    assert fake_llm.pending() == 0  # bounded: exactly the scripted attempts were used


def test_background_merge_without_llm_is_503_and_stores_nothing(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    response = inline_api.post(
        f"/api/agents/{agent_id}/background", json={"content": "You like tea."}
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "llm_not_configured" and "MEMORA_LLM_BASE_URL" in error["message"]
    assert _agent_row(pool, agent_id) is None


def test_blank_background_content_is_422(inline_api: Any, agent_id: str) -> None:
    response = inline_api.post(f"/api/agents/{agent_id}/background", json={"content": "   "})
    assert response.status_code == 422
