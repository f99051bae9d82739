"""Seed 003's .env, as written there, on the whole stack as `memora serve` runs it (the write
API, the query service and a Celery worker per stage, as processes): MEMORA_API_DATABASE_URL and
MEMORA_API_LLM_* alone reach the database and the LLM (the fake server), and a misspelt
MEMORA_* variable is reported in every process's log with the nearest known name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memora.basics.config import Settings
from memora.extraction.llm import MARKER
from memora.infra.embedded import free_port
from services.cli.stack import WORKER_QUEUES, Stack
from tests.conftest import wait_until
from tests.fakes import FakeOpenAI, Reply
from tests.integration.test_llm_extraction import ANSWER, ITEMS

pytestmark = pytest.mark.integration

TYPO = "MEMORA_EMBEDING_BATCH_SIZE"
WARNING = f"unknown setting {TYPO} is ignored; did you mean MEMORA_EMBEDDING_BATCH_SIZE?"


class SeedNamedStack(Stack):
    """The processes get the database's URL under seed 003's name only."""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in super().env().items() if not k.startswith(("MEMORA_LLM", "LLM_"))}
        env["MEMORA_API_DATABASE_URL"] = env.pop("MEMORA_DATABASE_URL")
        return env


@pytest.fixture(scope="module")
def seed_stack(
    settings: Settings, redis_url: str, data_dir: Path, fake_llm_server: FakeOpenAI
) -> Iterator[Stack]:
    s = settings.model_copy(
        update={
            "broker_url": f"{redis_url.rsplit('/', 1)[0]}/12",
            "data_dir": data_dir / "seed-stack",
            "port": free_port(),
            "query_port": free_port(),
        }
    )
    env = {
        "MEMORA_API_LLM_PROVIDER": "openai",
        "MEMORA_API_LLM_API_KEY": "sk-seed-key",
        "MEMORA_API_LLM_MODEL": "seed-model",
        "MEMORA_API_LLM_BASE_URL": fake_llm_server.base_url,
        TYPO: "8",
    }
    workers = {k: v for k, v in WORKER_QUEUES.items() if k != "opinions"}
    stack = SeedNamedStack(
        s, workers=workers, with_beat=False, log_dir=data_dir / "seed-logs", extra_env=env
    )
    try:
        stack.start()
        stack.wait_ready()
        yield stack
    finally:
        stack.stop()


def test_the_seeds_names_reach_the_database_and_the_llm(
    seed_stack: Stack, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    assert "MEMORA_DATABASE_URL" not in seed_stack.env()
    fake_llm.always(Reply(ANSWER), when=MARKER)
    base = f"http://{seed_stack.settings.host}:{seed_stack.settings.port}"
    body = {"agent_id": agent_id, "items": ITEMS, "document_id": "storm"}
    accepted = httpx.post(f"{base}/api/memories/batch", json=body, timeout=30)
    assert accepted.status_code == 200, accepted.text
    operation = f"{base}/api/operations/{accepted.json()['operation_id']}"

    def finished() -> dict[str, Any] | None:
        op: dict[str, Any] = httpx.get(operation, timeout=10).json()
        return op if op["status"] in ("completed", "failed") else None

    op = wait_until(finished, 120, 0.3)
    assert op["status"] == "completed", op
    assert op["counts"]["units"] == 3  # the LLM's three facts, not the local extractor's
    calls = fake_llm.requests_matching(MARKER)
    assert calls, "the worker never called the LLM"
    assert {c.body["model"] for c in calls} == {"seed-model"}
    assert {c.headers["authorization"] for c in calls} == {"Bearer sk-seed-key"}
    with pool.connection() as conn:  # written to the database MEMORA_API_DATABASE_URL names
        texts = [
            r["text"]
            for r in conn.execute(
                "SELECT text FROM memory_units WHERE agent_id = %s", (agent_id,)
            ).fetchall()
        ]
    assert any("Frankfurt" in t for t in texts)


def test_a_misspelt_variable_is_reported_by_every_process(seed_stack: Stack) -> None:
    logs = seed_stack.log_dir
    assert logs is not None
    names = ["api", "query", *(f"worker-{w}" for w in seed_stack.workers)]
    for name in names:
        assert WARNING in (logs / f"{name}.log").read_text(), name
