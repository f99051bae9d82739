"""Test doubles that run for real: the fake OpenAI-compatible server and its fixtures.

tests/conftest.py imports the fixtures below, so every test can ask for `fake_llm` (the
server, cleared before each test) and `llm_settings` (the suite's settings pointed at it, with
fast back-off and short timeouts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings
from tests.fakes.openai_server import Fail, FakeOpenAI, Recorded, Reply

__all__ = ["Fail", "FakeOpenAI", "Recorded", "Reply", "fake_llm", "fake_llm_server", "llm_settings"]

LLM_TEST_SETTINGS = {
    "llm_api_key": "test-key",
    "llm_model": "fake-model",
    "llm_timeout_seconds": 2.0,
    "llm_max_retries": 2,
    "llm_backoff_seconds": 0.01,
    "llm_backoff_max_seconds": 0.05,
    "llm_invalid_output_retries": 1,
}


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture()
def fake_llm(fake_llm_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    fake_llm_server.reset()
    yield fake_llm_server
    fake_llm_server.reset()


@pytest.fixture()
def llm_settings(settings: Settings, fake_llm: FakeOpenAI) -> Settings:
    return settings.model_copy(update={"llm_base_url": fake_llm.base_url, **LLM_TEST_SETTINGS})


@pytest.fixture()
def llm_inline_api(llm_settings: Settings, pool: Any) -> Iterator[Any]:
    """The write API with MEMORA_EXTRACTOR=llm against the fake LLM server, stages inline."""
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from memora.pipeline.runner import Pipeline
    from services.api.app import create_app

    settings = llm_settings.model_copy(update={"extractor": "llm"})
    app = create_app(settings, pool=pool, backend=InlineBackend(Pipeline(settings, pool)))
    with TestClient(app) as client:
        yield client
