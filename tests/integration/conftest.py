"""Fixtures that several integration modules share (one instance for the session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memora.basics.config import Settings
from tests.fakes import LLM_TEST_SETTINGS, FakeOpenAI
from tests.integration.stack_support import served_stack, topology


@pytest.fixture(scope="session")
def served(
    settings: Settings, redis_url: str, data_dir: Path, fake_llm_server: FakeOpenAI
) -> Iterator[Any]:
    """The whole stack as `memora serve` runs it (stack_support.served_stack): one for
    test_first_hour and test_ui_browser."""
    with served_stack(settings, redis_url, data_dir, fake_llm_server.base_url) as stack:
        yield stack


@pytest.fixture(scope="module")
def client_url(
    settings: Settings, pool: Any, pipeline: Any, fake_llm_server: FakeOpenAI
) -> Iterator[str]:
    """The write API's URL for the clients' tests (Python and TypeScript): the query service and
    the write API forwarding to it under uvicorn, on the suite's PostgreSQL and the fake LLM
    server, both services' work inline (think's opinions too)."""
    llm = settings.model_copy(
        update={"llm_base_url": fake_llm_server.base_url, **LLM_TEST_SETTINGS}
    )
    with topology(llm, pool, pipeline, query_inline=True) as served:
        yield served.url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on `served` run one after the other, where the last of them stands: the stack
    is started once and is up for as short a while as a session's fixture can be."""
    users = [item for item in items if "served" in getattr(item, "fixturenames", ())]
    if len(users) < 2:
        return
    last = items.index(users[-1])
    others = [item for item in items[:last] if item not in set(users)]
    items[:] = [*others, *users, *items[last + 1 :]]
