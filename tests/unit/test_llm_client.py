"""The LLM client against the fake OpenAI server: retries, re-asks, typed errors, usage."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel, Field

from memora.basics.config import Settings
from memora.basics.errors import PermanentStageError, TransientStageError
from memora.nlp.llm import (
    LLMCall,
    LLMClient,
    LLMInvalidOutput,
    LLMNotConfigured,
    LLMRequestError,
    LLMUnavailable,
    UsageRegistry,
    extract_json,
)
from tests.fakes import LLM_TEST_SETTINGS, Fail, FakeOpenAI, Reply


class Answer(BaseModel):
    name: str
    score: float = Field(ge=0, le=1)


def _client(fake: FakeOpenAI, **overrides: object) -> tuple[LLMClient, UsageRegistry]:
    settings = Settings(llm_base_url=fake.base_url, **{**LLM_TEST_SETTINGS, **overrides})  # type: ignore[arg-type]
    registry = UsageRegistry()
    return LLMClient(settings, registry=registry), registry


def test_not_configured_is_typed_and_permanent() -> None:
    with pytest.raises(LLMNotConfigured) as info:
        LLMClient(Settings(llm_base_url=None, llm_api_key=None))
    assert isinstance(info.value, PermanentStageError)


def test_structured_output_is_validated_and_usage_counted(fake_llm: FakeOpenAI) -> None:
    client, registry = _client(fake_llm, llm_think_model="think-model")
    seen: list[LLMCall] = []
    registry.add_listener(seen.append)
    fake_llm.script(Reply({"name": "Alice", "score": 0.5}))
    result = client.complete_json("think", [{"role": "system", "content": "Be terse."}], Answer)
    assert result == Answer(name="Alice", score=0.5)
    body = fake_llm.requests[-1].body
    assert body["model"] == "think-model"
    assert body["response_format"] == {"type": "json_object"}
    assert '"score"' in body["messages"][0]["content"]  # the schema rides in the system message
    totals = registry.snapshot()["think"]
    assert totals["requests"] == 1 and totals["outcome_ok"] == 1
    assert totals["prompt_tokens"] > 0 and totals["completion_tokens"] > 0
    assert [c.outcome for c in seen] == ["ok"] and seen[0].model == "think-model"


def test_invalid_json_is_re_asked_then_accepted(fake_llm: FakeOpenAI) -> None:
    client, registry = _client(fake_llm)
    fake_llm.script(Reply("{not json"), Reply('```json\n{"name": "Bob", "score": 1}\n```'))
    assert (
        client.complete_json("extraction", [{"role": "user", "content": "go"}], Answer).name
        == "Bob"
    )
    assert len(fake_llm.requests) == 2
    second = fake_llm.requests[1].messages
    assert second[-2] == {"role": "assistant", "content": "{not json"}
    assert "not valid" in second[-1]["content"]
    totals = registry.snapshot()["extraction"]
    assert totals["outcome_invalid_output"] == 1 and totals["outcome_ok"] == 1


def test_invalid_output_gives_up_after_bounded_re_asks(fake_llm: FakeOpenAI) -> None:
    client, _ = _client(fake_llm)
    fake_llm.always(Reply({"name": "Bob", "score": 7}))  # schema-invalid: score > 1
    with pytest.raises(LLMInvalidOutput) as info:
        client.complete_json("extraction", [{"role": "user", "content": "go"}], Answer)
    assert isinstance(info.value, PermanentStageError)
    assert "score" in str(info.value)
    assert len(fake_llm.requests) == 1 + LLM_TEST_SETTINGS["llm_invalid_output_retries"]  # type: ignore[operator]


def test_429_and_500_are_retried_with_backoff(fake_llm: FakeOpenAI) -> None:
    client, registry = _client(fake_llm)
    fake_llm.script(Fail(429), Fail(503), Reply("all good"))
    assert client.complete_text("think", [{"role": "user", "content": "hi"}]) == "all good"
    totals = registry.snapshot()["think"]
    assert totals["outcome_rate_limited"] == 1 and totals["outcome_server_error"] == 1
    assert totals["requests"] == 3


def test_persistent_failure_raises_transient_error_after_bounded_retries(
    fake_llm: FakeOpenAI,
) -> None:
    client, _ = _client(fake_llm)
    fake_llm.always(Fail(500))
    with pytest.raises(LLMUnavailable) as info:
        client.complete_text("think", [{"role": "user", "content": "hi"}])
    assert isinstance(info.value, TransientStageError)
    assert len(fake_llm.requests) == 1 + LLM_TEST_SETTINGS["llm_max_retries"]  # type: ignore[operator]


def test_timeouts_are_bounded(fake_llm: FakeOpenAI) -> None:
    client, registry = _client(fake_llm, llm_timeout_seconds=0.3, llm_max_retries=1)
    fake_llm.always(Reply("too late", delay=1.5))
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="timed out"):
        client.complete_text("background", [{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 2.5
    assert registry.snapshot()["background"]["outcome_timeout"] == 2


def test_rejected_requests_are_not_retried(fake_llm: FakeOpenAI) -> None:
    client, _ = _client(fake_llm)
    fake_llm.always(Fail(401, "bad key"))
    with pytest.raises(LLMRequestError, match="401"):
        client.complete_text("think", [{"role": "user", "content": "hi"}])
    assert len(fake_llm.requests) == 1


def test_a_failing_listener_does_not_break_calls(fake_llm: FakeOpenAI) -> None:
    client, registry = _client(fake_llm)

    def broken(_: LLMCall) -> None:
        raise RuntimeError("metrics down")

    remove = registry.add_listener(broken)
    fake_llm.script(Reply("fine"))
    assert client.complete_text("think", [{"role": "user", "content": "hi"}]) == "fine"
    remove()


def test_extract_json_strips_fences_thinking_and_chatter() -> None:
    assert extract_json('<think>hmm {"x": 0}</think>\n```json\n{"a": 1}\n```') == '{"a": 1}'
    assert extract_json('Sure! Here it is: {"a": {"b": 2}} Hope that helps.') == '{"a": {"b": 2}}'
