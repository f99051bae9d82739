"""Fixtures for the schema fuzz tests: the apps in-process on a database of their own.

The fuzzers post arbitrary agents, documents and profiles; they get their own database
(`memora_fuzz_…`) on the suite's PostgreSQL server, migrated once, so nothing they write is
seen by the other tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.lifecycle.memory import CONFLICT_MARKER
from memora.lifecycle.reflect import REFLECT_MARKER
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from tests.conftest import own_database
from tests.fakes import LLM_TEST_SETTINGS, FakeOpenAI, Reply

OPINION = {"statement": "Fuzzing finds bugs", "reasons": ["it did"], "confidence": 0.7}


@pytest.fixture(scope="session")
def fuzz_db_url(pg_url: str) -> Iterator[str]:
    with own_database(pg_url, "memora_fuzz") as url:
        yield url


@pytest.fixture(scope="session")
def fuzz_llm() -> Iterator[FakeOpenAI]:
    """A fake LLM of their own that always answers well: the fuzzers test the API, not the
    handling of bad LLM answers (tests/integration covers that)."""
    server = FakeOpenAI().start()
    server.always(Reply({"background": "I am an agent under test."}), when="Current background")
    server.always(Reply("I think fuzzing is useful."), when=THINK_MARKER)
    server.always(Reply({"opinions": [OPINION]}), when=OPINION_MARKER)
    server.always(Reply({"decision": "ADD", "reason": "new"}), when=CONFLICT_MARKER)
    server.always(
        Reply({"insights": [{"text": "The agent is under test.", "sources": [1]}]}),
        when=REFLECT_MARKER,
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fuzz_settings(settings: Settings, fuzz_db_url: str, fuzz_llm: FakeOpenAI) -> Settings:
    """The suite's settings on the fuzz database, with the fake LLM (local extraction)."""
    return settings.model_copy(
        update={
            "database_url": fuzz_db_url,
            "llm_base_url": fuzz_llm.base_url,
            "extractor": "local",
            **LLM_TEST_SETTINGS,
        }
    )


@pytest.fixture(scope="session")
def fuzz_pool(fuzz_db_url: str) -> Iterator[Any]:
    from memora.db.pool import make_pool

    p = make_pool(fuzz_db_url, min_size=1, max_size=8, name="fuzz")
    yield p
    p.close()


@pytest.fixture(scope="session")
def fuzz_pipeline(fuzz_settings: Settings, fuzz_pool: Any) -> Any:
    from memora.pipeline.runner import Pipeline

    return Pipeline(fuzz_settings, fuzz_pool)
