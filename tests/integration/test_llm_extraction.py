"""Ingestion with MEMORA_EXTRACTOR=llm against the fake LLM server: inline, and through a real
Celery worker for the failure paths (bounded retries, failed operation visible)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from memora.basics.config import Settings
from memora.extraction.llm import MARKER
from tests.conftest import own_database_pool, wait_until
from tests.fakes import Fail, FakeOpenAI, Reply

pytestmark = pytest.mark.integration

ITEMS = [
    {
        "content": "Alice: The storm knocked out power in Porto last night.\n"
        "Bob: Did that stop your launch?\nAlice: Yes, we postponed it to next week.",
        "context": "launch chat",
        "event_date": "2024-03-10T09:00:00Z",
    },
    {
        "content": "assistant: I suggested moving the servers to Frankfurt.",
        "event_date": "2024-03-10T09:05:00Z",
    },
]
ANSWER = {
    "facts": [
        {
            "item": 0,
            "text": "A storm knocked out power in Porto on March 9, 2024.",
            "fact_type": "world",
            "occurred_start": "2024-03-09",
            "entities": [{"name": "Porto", "type": "LOCATION"}],
            "relations": [{"target": 1, "type": "causes"}],
        },
        {
            "item": 0,
            "text": "Alice postponed her product launch to the week of March 17, 2024 "
            "because of the outage.",
            "fact_type": "world",
            "occurred_start": "2024-03-17",
            "entities": [
                {"name": "Alice", "type": "PERSON"},
                {"name": "product launch", "type": "CONCEPT"},
            ],
            "relations": [{"target": 0, "type": "caused_by"}],
        },
        {
            "item": 1,
            "text": "I suggested that Alice move her servers to Frankfurt.",
            "fact_type": "agent",
            "entities": [
                {"name": "Alice", "type": "PERSON"},
                {"name": "Frankfurt", "type": "LOCATION"},
            ],
            "relations": [{"target": 0, "type": "prevents"}],
        },
    ]
}


def test_llm_extraction_end_to_end(
    llm_inline_api: Any, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    fake_llm.script(Reply("```json\n{broken"), Reply(ANSWER), when=MARKER)
    body = {"agent_id": agent_id, "items": ITEMS, "document_id": "storm"}
    response = llm_inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200
    op = llm_inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed", op
    assert op["counts"]["units"] == 3 and op["counts"]["links_causal"] > 0
    with pool.connection() as conn:
        units = conn.execute(
            "SELECT id, text, fact_type, occurred_start, item_index, seq, "
            "embedding IS NOT NULL AS e FROM memory_units WHERE agent_id = %s "
            "ORDER BY item_index, seq",
            (agent_id,),
        ).fetchall()
        ents = {
            (r["canonical_name"], r["entity_type"])
            for r in conn.execute(
                "SELECT canonical_name, entity_type FROM entities WHERE agent_id = %s", (agent_id,)
            )
        }
        causal = {
            (r["a"], r["b"], r["link_type"])
            for r in conn.execute(
                "SELECT fa.seq + 10 * fa.item_index AS a, fb.seq + 10 * fb.item_index AS b, "
                "l.link_type "
                "FROM memory_links l JOIN memory_units fa ON fa.id = l.from_unit "
                "JOIN memory_units fb ON fb.id = l.to_unit "
                "WHERE fa.agent_id = %s "
                "AND l.link_type IN ('causes', 'caused_by', 'enables', 'prevents')",
                (agent_id,),
            )
        }
    assert [u["text"] for u in units] == [f["text"] for f in ANSWER["facts"]]
    assert [u["fact_type"] for u in units] == ["world", "world", "agent"]
    assert [(u["item_index"], u["seq"]) for u in units] == [(0, 0), (0, 1), (1, 0)]
    assert units[0]["occurred_start"].isoformat() == "2024-03-09T00:00:00+00:00"
    assert all(u["e"] for u in units)
    assert {
        ("Porto", "LOCATION"),
        ("Alice", "PERSON"),
        ("product launch", "CONCEPT"),
        ("Frankfurt", "LOCATION"),
    } <= ents
    assert {
        (0, 1, "causes"),
        (1, 0, "caused_by"),
        (10, 0, "prevents"),
        (0, 10, "prevents"),
    } <= causal
    prompt = fake_llm.requests[0].content_of("user")
    assert "[item 0] time: 2024-03-10T09:00:00+00:00 | context: launch chat" in prompt
    assert "[item 1] time: 2024-03-10T09:05:00+00:00" in prompt


def test_the_llm_extractors_entity_relations_are_recorded(
    llm_inline_api: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    """Relations the LLM read in a fact are recorded beside the parse's, `source` llm."""
    fact = {
        "item": 0, "text": "Derek is the team lead in charge of Maya at Northwind.",
        "fact_type": "world",
        "entities": [{"name": "Derek", "type": "PERSON"}, {"name": "Maya", "type": "PERSON"},
                     {"name": "Northwind", "type": "ORGANIZATION"}],
        "entity_relations": [{"subject": "Maya", "relation": "reports to", "object": "Derek"},
                             {"subject": "Maya", "relation": "likes", "object": "Derek"}],
    }  # fmt: skip
    fake_llm.script(Reply({"facts": [fact]}), when=MARKER)
    items = [{"content": "Maya: Derek leads my team at Northwind.", "event_date": "2024-03-10"}]
    body = {"agent_id": agent_id, "items": items, "document_id": "team"}
    response = llm_inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    derek = llm_inline_api.get(f"/api/agents/{agent_id}/entities/Derek")
    assert derek.status_code == 200, derek.text
    found = [(r["relation"], r["direction"], r["other"]["name"], r["source"])
             for r in derek.json()["relations"]]  # fmt: skip
    assert found == [("manages", "outgoing", "Maya", "llm")]


# --------------------------------------------------------------------- real worker
WORKER_LLM_ENV = {
    "MEMORA_EXTRACTOR": "llm",
    "MEMORA_LLM_API_KEY": "test-key",
    "MEMORA_LLM_MAX_RETRIES": "1",
    "MEMORA_LLM_BACKOFF_SECONDS": "0.01",
    "MEMORA_LLM_BACKOFF_MAX_SECONDS": "0.05",
    "MEMORA_LLM_TIMEOUT_SECONDS": "0.5",
    "MEMORA_LLM_INVALID_OUTPUT_RETRIES": "1",
    "MEMORA_TASK_MAX_RETRIES": "1",
    "MEMORA_TASK_RETRY_BACKOFF_MAX": "1",
}


@pytest.fixture(scope="module")
def llm_worker_db(pg_url: str) -> Iterator[tuple[str, Any]]:
    """A database of its own: on the suite's, the suite's reconciler would hand an operation
    still waiting for its retry to the suite's workers, which extract locally."""
    with own_database_pool(pg_url, "memora_llm_worker") as database:
        yield database


@pytest.fixture(scope="module")
def llm_worker_api(
    settings: Settings,
    redis_url: str,
    data_dir: Any,
    fake_llm_server: FakeOpenAI,
    llm_worker_db: tuple[str, Any],
) -> Iterator[Any]:
    """An extract-only Celery worker using the LLM extractor, on its own Redis and PostgreSQL
    databases so the suite's other workers never take its tasks; the write API enqueues to it."""
    from fastapi.testclient import TestClient

    from services.api.app import create_app
    from services.cli.stack import Stack

    url, own_pool = llm_worker_db
    broker = redis_url.rsplit("/", 1)[0] + "/7"
    redis.Redis.from_url(broker).flushdb()  # nothing an earlier test left for no worker
    stack_settings = settings.model_copy(
        update={
            "database_url": url,
            "broker_url": broker,
            "llm_base_url": fake_llm_server.base_url,
            # its own metrics and heartbeat files: the suite's extract worker has the same name
            "data_dir": data_dir / "llm-stack",
        }
    )
    env = WORKER_LLM_ENV | {"MEMORA_LLM_BASE_URL": fake_llm_server.base_url}
    stack = Stack(
        stack_settings,
        workers={"extract": ["extract"]},
        with_api=False,
        with_query=False,
        with_beat=False,
        log_dir=data_dir / "llm-worker-logs",
        extra_env=env,
    )
    stack.start()
    try:
        with TestClient(create_app(stack_settings, pool=own_pool)) as client:
            yield client
    finally:
        stack.stop()


def _final(api: Any, op_id: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        op = api.get(f"/api/operations/{op_id}").json()
        return op if op["status"] in ("completed", "failed") else None

    return wait_until(finished, 90)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "answer",
    [Fail(500), Fail(429), Reply("too slow", delay=2.0)],
    ids=["http-500", "http-429", "timeout"],
)
def test_unavailable_llm_fails_the_operation_after_bounded_retries(
    llm_worker_api: Any,
    llm_worker_db: tuple[str, Any],
    fake_llm: FakeOpenAI,
    agent_id: str,
    answer: Any,
) -> None:
    fake_llm.always(answer, when=MARKER)
    body = {"agent_id": agent_id, "items": ITEMS, "document_id": "storm"}
    op_id = llm_worker_api.post("/api/memories/batch", json=body).json()["operation_id"]
    op = _final(llm_worker_api, op_id)
    assert op["status"] == "failed" and "LLMUnavailable" in op["error"]
    assert op["stages"]["extract"]["status"] == "failed"
    assert op["stages"]["extract"]["attempts"] == 2  # 1 + MEMORA_TASK_MAX_RETRIES
    assert (
        len(fake_llm.requests_matching(MARKER)) == 2 * 2
    )  # each attempt: 1 + MEMORA_LLM_MAX_RETRIES
    docs = llm_worker_api.get(f"/api/agents/{agent_id}/documents").json()["documents"]
    assert [d["document_id"] for d in docs] == ["storm"] and docs[0]["status"] == "failed"
    with llm_worker_db[1].connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM memory_units WHERE agent_id = %s", (agent_id,)
        ).fetchone()
    assert row["n"] == 0


def test_invalid_output_fails_at_once_without_task_retries(
    llm_worker_api: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    fake_llm.always(Reply({"facts": "not a list"}), when=MARKER)
    body = {"agent_id": agent_id, "items": ITEMS, "document_id": "bad-json"}
    op_id = llm_worker_api.post("/api/memories/batch", json=body).json()["operation_id"]
    op = _final(llm_worker_api, op_id)
    assert op["status"] == "failed" and "LLMInvalidOutput" in op["error"]
    assert op["stages"]["extract"]["attempts"] == 1
    assert len(fake_llm.requests_matching(MARKER)) == 2  # 1 + MEMORA_LLM_INVALID_OUTPUT_RETRIES
