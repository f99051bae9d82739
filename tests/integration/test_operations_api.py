"""Listing and retrying operations: GET /api/operations, POST /api/operations/{id}/retry,
`memora ops list|retry` and `memora status`, on real PostgreSQL and Redis. Operations fail for
real: the LLM extractor gets invalid answers from the fake LLM server; the failure is recorded
as the Celery task records it (Pipeline.record_failure); the retry runs inline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES, Stage
from memora.basics.tenancy import Scope
from memora.extraction.llm import MARKER
from memora.pipeline.monitoring import queue_depths
from memora.store import operations
from tests.conftest import own_database_pool
from tests.fakes import FakeOpenAI, Reply
from tests.integration.auth_support import auth_app, make_tenant
from tests.integration.test_llm_extraction import ANSWER, ITEMS

pytestmark = pytest.mark.integration
MEMORA = str(Path(sys.executable).parent / "memora")


@pytest.fixture(scope="module")
def ops_db(pg_url: str) -> Iterator[tuple[str, Any]]:
    """A database of its own: these tests leave operations queued on brokers no worker
    consumes; on the suite's database its reconciler would hand them to the suite's workers."""
    with own_database_pool(pg_url, "memora_ops") as database:
        yield database


@pytest.fixture()
def ops_settings(llm_settings: Settings, ops_db: tuple[str, Any]) -> Settings:
    return llm_settings.model_copy(update={"extractor": "llm", "database_url": ops_db[0]})


@pytest.fixture()
def llm_api(ops_settings: Settings, ops_db: tuple[str, Any]) -> Iterator[tuple[Any, Any]]:
    """The write API (auth on) whose inline pipeline extracts with the (fake) LLM."""
    from memora.pipeline.runner import Pipeline

    pipeline = Pipeline(ops_settings, ops_db[1])
    with auth_app(ops_settings, ops_db[1], pipeline) as client:
        yield client, pipeline


def _failed_operation(api: Any, pipeline: Any, fake_llm: FakeOpenAI, headers: Any) -> str:
    """An ingest whose extraction fails: invalid LLM answers, recorded as the final failure."""
    fake_llm.always(Reply({"facts": "not a list"}), when=MARKER)
    agent = f"ops-{uuid.uuid4().hex[:8]}"
    body = {"agent_id": agent, "items": ITEMS, "document_id": "storm"}
    response = api.post("/api/memories/batch", json=body, headers=headers)
    assert response.status_code == 200, response.text
    op_id = response.json()["operation_id"]
    op = api.get(f"/api/operations/{op_id}", headers=headers).json()
    assert op["status"] == "running" and op["stages"]["extract"]["attempts"] == 1
    pipeline.record_failure(Stage.EXTRACT, uuid.UUID(op_id), "LLMInvalidOutput: bad", final=True)
    return op_id


def test_failed_operation_is_listed_and_retried_from_its_failed_stage(
    llm_api: Any, fake_llm: FakeOpenAI
) -> None:
    api, pipeline = llm_api
    tenant, other = make_tenant(api, "opsa"), make_tenant(api, "opsb")
    op_id = _failed_operation(api, pipeline, fake_llm, tenant.headers)

    listed = api.get("/api/operations", params={"status": "failed"}, headers=tenant.headers)
    assert listed.status_code == 200, listed.text
    failed = listed.json()["operations"]
    assert [o["id"] for o in failed] == [op_id]
    assert failed[0]["stage"] == "extract" and "LLMInvalidOutput" in failed[0]["error"]
    assert failed[0]["stages"]["extract"]["status"] == "failed"
    assert api.get("/api/operations", headers=other.headers).json()["operations"] == []
    assert api.post(f"/api/operations/{op_id}/retry", headers=other.headers).status_code == 404

    fake_llm.reset()
    fake_llm.always(Reply(ANSWER), when=MARKER)  # the cause is fixed
    retried = api.post(f"/api/operations/{op_id}/retry", headers=tenant.headers)
    assert retried.status_code == 202, retried.text
    assert retried.json()["outcome"] == "reopened"
    op = api.get(f"/api/operations/{op_id}", headers=tenant.headers).json()
    assert op["status"] == "completed" and op["error"] is None, op
    assert op["counts"]["units"] == 3
    extract = op["stages"]["extract"]
    assert extract["retries"] == 1 and "LLMInvalidOutput" in extract["last_error"]
    assert all(op["stages"][s.value]["status"] == "done" for s in INGEST_STAGES)

    again = api.post(f"/api/operations/{op_id}/retry", headers=tenant.headers)
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_failed"
    assert api.post(
        f"/api/operations/{uuid.uuid4()}/retry", headers=tenant.headers
    ).status_code == (404)
    assert api.post(f"/api/operations/{op_id}/retry").status_code == 401


def test_retry_is_idempotent_while_the_retry_is_under_way(
    llm_api: Any, fake_llm: FakeOpenAI
) -> None:
    api, pipeline = llm_api
    pool = pipeline.pool
    tenant = make_tenant(api, "opsc")
    op_id = _failed_operation(api, pipeline, fake_llm, tenant.headers)
    with pool.connection() as conn, conn.transaction():  # a retry already queued
        outcome, row = operations.reopen_failed(conn, Scope(tenant.tenant_id), uuid.UUID(op_id))
    assert outcome == "reopened" and row is not None and row.status == "queued"
    requests_before = len(fake_llm.requests)
    for _ in range(2):
        response = api.post(f"/api/operations/{op_id}/retry", headers=tenant.headers)
        assert response.status_code == 202 and response.json()["outcome"] == "active"
        assert response.json()["operation"]["status"] == "queued"
    assert len(fake_llm.requests) == requests_before  # nothing was run again
    op = api.get(f"/api/operations/{op_id}", headers=tenant.headers).json()
    assert op["stages"]["extract"]["retries"] == 1


def test_operations_list_filters_and_pages(llm_api: Any, fake_llm: FakeOpenAI) -> None:
    api, _ = llm_api
    tenant = make_tenant(api, "opsd")
    fake_llm.always(Reply(ANSWER), when=MARKER)
    ids = []
    for i in range(5):
        agent = "pager-a" if i % 2 == 0 else "pager-b"
        body = {"agent_id": agent, "items": ITEMS, "document_id": f"doc-{i}"}
        ids.append(
            api.post("/api/memories/batch", json=body, headers=tenant.headers).json()[
                "operation_id"
            ]
        )
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.get("/api/operations", params=params, headers=tenant.headers).json()
        assert len(page["operations"]) <= 2
        seen += [o["id"] for o in page["operations"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))  # newest first, each once
    only_a = api.get(
        "/api/operations", params={"agent_id": "pager-a"}, headers=tenant.headers
    ).json()["operations"]
    assert {o["agent_id"] for o in only_a} == {"pager-a"} and len(only_a) == 3
    assert (
        api.get("/api/operations", params={"status": "completed"}, headers=tenant.headers).json()[
            "operations"
        ]
        != []
    )
    for bad in ({"cursor": "zzz"}, {"status": "broken"}, {"limit": 0}, {"agent_id": "a/b"}):
        assert api.get("/api/operations", params=bad, headers=tenant.headers).status_code == 422


def _cli(*args: str, settings: Settings, broker: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {
        "MEMORA_DATABASE_URL": settings.require_database_url(),
        "MEMORA_BROKER_URL": broker,
    }
    return subprocess.run(
        [MEMORA, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_cli_lists_retries_and_status_names_failed_operations(
    llm_api: Any, fake_llm: FakeOpenAI, ops_settings: Settings, redis_url: str
) -> None:
    api, pipeline = llm_api
    tenant = make_tenant(api, "opse")
    op_id = _failed_operation(api, pipeline, fake_llm, tenant.headers)
    broker = redis_url.rsplit("/", 1)[0] + "/9"  # a database no worker of the suite consumes
    redis.Redis.from_url(broker).flushdb()

    listed = _cli("ops", "list", "--failed", "--json", settings=ops_settings, broker=broker)
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert op_id in rows and rows[op_id]["status"] == "failed"
    assert rows[op_id]["agent_id"].startswith(f"{tenant.tenant_id}/")
    table = _cli("ops", "list", "--failed", "--limit", "500", settings=ops_settings, broker=broker)
    assert table.returncode == 0 and op_id in table.stdout and "LLMInvalidOutput" in table.stdout

    status = _cli("status", "--json", settings=ops_settings, broker=broker)
    assert status.returncode == 0, status.stderr
    assert op_id in {f["id"] for f in json.loads(status.stdout)["failed"]}
    text = _cli("status", settings=ops_settings, broker=broker)
    assert "failed operations" in text.stdout and "memora ops retry" in text.stdout

    retried = _cli("ops", "retry", op_id, settings=ops_settings, broker=broker)
    assert retried.returncode == 0, retried.stderr
    assert "re-queued" in retried.stderr
    op = api.get(f"/api/operations/{op_id}", headers=tenant.headers).json()
    assert op["status"] == "queued" and op["stage"] == "extract"
    assert queue_depths(redis.Redis.from_url(broker), ["extract"]) == {"extract": 1}
    again = _cli("ops", "retry", op_id, settings=ops_settings, broker=broker)
    assert again.returncode == 0 and "nothing to do" in again.stderr
    assert queue_depths(redis.Redis.from_url(broker), ["extract"]) == {"extract": 1}
    missing = _cli("ops", "retry", str(uuid.uuid4()), settings=ops_settings, broker=broker)
    assert missing.returncode == 1 and "not found" in missing.stderr
