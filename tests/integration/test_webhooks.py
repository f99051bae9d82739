"""Webhooks through the real stack: a receiver on 127.0.0.1 gets signed deliveries from the
Celery webhook worker (MEMORA_WEBHOOK_ALLOW_PRIVATE=true in the workers, tests/conftest.py);
failures are retried and recorded; redirects are not followed; private targets are refused
when the flag is off; one tenant never sees another's endpoints."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from pydantic import SecretStr

from memora.basics.config import Settings
from memora.basics.stages import Stage
from memora.basics.tenancy import Scope
from memora.pipeline.runner import Pipeline
from memora.store import operations
from tests.conftest import wait_until
from tests.integration.auth_support import (  # noqa: F401 - fixture
    ADMIN,
    ADMIN_KEY,
    Tenant,
    auth_api,
    make_tenant,
)
from tests.integration.metrics_support import value, worker_metrics
from tests.integration.stack_support import Client, topology
from tests.integration.webhook_support import Received, Receiver, receiving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


@pytest.fixture(scope="module")
def celery_auth_api(worker_stack: Any, pool: Any) -> Iterator[Any]:
    """The write API with auth on, private targets allowed, and the real broker and workers."""
    from fastapi.testclient import TestClient

    from services.api.app import create_app

    update = {
        "auth_required": True,
        "admin_key": SecretStr(ADMIN_KEY),
        "auth_failure_limit": "",
        "webhook_allow_private": True,
    }
    app = create_app(worker_stack.settings.model_copy(update=update), pool=pool)
    with TestClient(app) as client:
        yield client


def _register(api: Any, tenant: Tenant, url: str, events: list[str]) -> dict[str, Any]:
    created = api.post("/api/webhooks", json={"url": url, "events": events}, headers=tenant.headers)
    assert created.status_code == 201, created.text
    return dict(created.json())


def _deliveries(api: Any, tenant: Tenant, webhook_id: str) -> list[dict[str, Any]]:
    answer = api.get(f"/api/webhooks/{webhook_id}/deliveries", headers=tenant.headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["deliveries"])


def _verify(secret: str, request: Received) -> None:
    """The Standard Webhooks check, written out here rather than taken from memora."""
    h = request.headers
    signed = f"{h['webhook-id']}.{h['webhook-timestamp']}.".encode() + request.body
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert f"v1,{expected}" in h["webhook-signature"].split()
    assert abs(time.time() - int(h["webhook-timestamp"])) < 120


def test_a_processed_batch_is_reported_signed(celery_auth_api: Any, receiver: Receiver) -> None:
    api = celery_auth_api
    tenant = make_tenant(api, "hooks")
    path = f"/ok?t={tenant.tenant_id}"
    hook = _register(api, tenant, receiver.url + path, ["operation.completed"])
    assert hook["secret"].startswith("whsec_") and hook["events"] == ["operation.completed"]
    listed = api.get("/api/webhooks", headers=tenant.headers).json()["webhooks"]
    assert [w["id"] for w in listed] == [hook["id"]] and "secret" not in listed[0]

    batch = {"agent_id": "alice", "items": [{"content": "Alice moved to Lisbon in May 2024."}]}
    accepted = api.post("/api/memories/batch", json=batch, headers=tenant.headers)
    assert accepted.status_code == 200, accepted.text
    operation_id = accepted.json()["operation_id"]

    (request,) = wait_until(lambda: receiver.at(path), timeout=120)
    _verify(hook["secret"], request)
    event = json.loads(request.body)
    assert event["type"] == "operation.completed"
    assert event["data"]["operation_id"] == operation_id
    assert event["data"]["agent_id"] == "alice" and event["data"]["status"] == "completed"
    (delivery,) = wait_until(
        lambda: [d for d in _deliveries(api, tenant, hook["id"]) if d["status"] == "succeeded"]
    )
    assert delivery["attempts"] == 1 and delivery["last_status_code"] == 204
    assert delivery["event_id"] == request.headers["webhook-id"]


def test_a_failing_receiver_is_retried_and_recorded(
    celery_auth_api: Any, receiver: Receiver, worker_stack: Any
) -> None:
    api = celery_auth_api
    tenant = make_tenant(api, "hooks")
    path = f"/fail?t={tenant.tenant_id}"
    hook = _register(api, tenant, receiver.url + path, ["document.deleted"])
    ping = api.post(f"/api/webhooks/{hook['id']}/test", headers=tenant.headers)
    assert ping.status_code == 202, ping.text

    wait_until(lambda: len(receiver.at(path)) >= 3, timeout=120)
    attempts = receiver.at(path)
    assert len({r.headers["webhook-id"] for r in attempts}) == 1  # one message, retried
    for request in attempts:
        _verify(hook["secret"], request)
    assert json.loads(attempts[0].body)["type"] == "webhook.ping"
    (delivery,) = _deliveries(api, tenant, hook["id"])
    assert delivery["id"] == ping.json()["delivery_id"]
    assert delivery["status"] == "pending" and delivery["attempts"] >= 2
    assert delivery["last_status_code"] == 500 and delivery["last_response"] == "receiver broke"
    samples = worker_metrics(worker_stack, "webhooks")  # counted on the worker's /metrics
    assert value(samples, "memora_webhook_attempts_total", outcome="retrying") >= 2
    assert (
        api.get("/api/webhooks", headers=tenant.headers).json()["webhooks"][0]["deliveries"][
            "pending"
        ]
        == 1
    )
    assert api.delete(f"/api/webhooks/{hook['id']}", headers=tenant.headers).status_code == 204
    assert api.get("/api/webhooks", headers=tenant.headers).json()["webhooks"] == []


def test_redirects_are_not_followed(celery_auth_api: Any, receiver: Receiver) -> None:
    api = celery_auth_api
    tenant = make_tenant(api, "hooks")
    path = f"/redirect?t={tenant.tenant_id}"
    before = len(receiver.at("/ok"))
    hook = _register(api, tenant, receiver.url + path, ["operation.failed"])
    assert api.post(f"/api/webhooks/{hook['id']}/test", headers=tenant.headers).status_code == 202

    (delivery,) = wait_until(
        lambda: [
            d
            for d in _deliveries(api, tenant, hook["id"])
            if d["attempts"] >= 1 and d["last_status_code"] is not None
        ]
    )
    assert delivery["last_status_code"] == 302 and delivery["status"] == "pending"
    assert "not followed" in delivery["last_error"]
    time.sleep(1.5)
    assert len(receiver.at("/ok")) == before


def test_document_deletion_and_failed_operations_are_events(
    celery_auth_api: Any, receiver: Receiver, pool: Any, pipeline: Any
) -> None:
    api = celery_auth_api
    tenant = make_tenant(api, "hooks")
    path = f"/ok?t={tenant.tenant_id}"
    hook = _register(api, tenant, receiver.url + path, ["document.deleted", "operation.failed"])
    batch = {"agent_id": "bob", "document_id": "notes", "items": [{"content": "Bob likes tea."}]}
    posted = api.post("/api/memories/batch", json=batch, headers=tenant.headers)
    assert posted.status_code == 200, posted.text
    operation = f"/api/operations/{posted.json()['operation_id']}"
    wait_until(  # its unit written: the deletion has one to count
        lambda: api.get(operation, headers=tenant.headers).json()["status"] == "completed"
    )
    deleted = api.delete("/api/agents/bob/documents/notes", headers=tenant.headers)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["units_deleted"] == 1

    # the final failure of an operation, recorded as the worker's on_failure records it: by a
    # pipeline whose backend hands its deliveries to the webhook worker
    with pool.connection() as conn:
        op_id = operations.create_operation(
            conn, Scope(tenant.tenant_id), "bob", kind=operations.OperationKind.REPAIR,
            first_stage=Stage.EMBED,
        )  # fmt: skip
    worker = Pipeline(pipeline.settings, pool, backend=api.app.state.backend)
    worker.record_failure(Stage.EMBED, op_id, "RuntimeError: boom", final=True)

    wait_until(lambda: len(receiver.at(path)) >= 2, timeout=120)
    events = {json.loads(r.body)["type"]: json.loads(r.body)["data"] for r in receiver.at(path)}
    assert events["document.deleted"]["document_id"] == "notes"
    assert events["document.deleted"]["deleted"] == deleted.json()["deleted"]  # the same counts
    assert events["operation.failed"]["operation_id"] == str(op_id)
    assert events["operation.failed"]["error"] == "RuntimeError: boom"
    for request in receiver.at(path):
        _verify(hook["secret"], request)


def test_private_targets_are_refused_when_not_allowed(auth_api: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api, "hooks")
    for url in (
        "http://127.0.0.1:8080/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://10.0.0.7/hook",
        "ftp://93.184.215.14/hook",
    ):
        body = {"url": url, "events": ["operation.completed"]}
        refused = auth_api.post("/api/webhooks", json=body, headers=tenant.headers)
        assert refused.status_code == 422, (url, refused.text)
        assert refused.json()["error"]["code"] == "unsafe_url"
    body = {"url": "https://93.184.215.14/hook", "events": ["no.such.event"]}
    refused = auth_api.post("/api/webhooks", json=body, headers=tenant.headers)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "validation_error"
    assert auth_api.get("/api/webhooks", headers=tenant.headers).json()["webhooks"] == []


def test_a_tenant_sees_only_its_own_webhooks(auth_api: Any) -> None:  # noqa: F811
    a, b = make_tenant(auth_api, "hooks"), make_tenant(auth_api, "hooks")
    hook = _register(auth_api, a, "https://93.184.215.14/hook", ["memory.superseded"])
    assert auth_api.get("/api/webhooks", headers=b.headers).json()["webhooks"] == []
    for method, suffix in (("get", "/deliveries"), ("post", "/test"), ("delete", "")):
        answer = getattr(auth_api, method)(f"/api/webhooks/{hook['id']}{suffix}", headers=b.headers)
        assert answer.status_code == 404, (method, suffix, answer.text)
        assert answer.json()["error"]["code"] == "not_found"
    assert len(auth_api.get("/api/webhooks", headers=a.headers).json()["webhooks"]) == 1
    missing = auth_api.get(f"/api/webhooks/{uuid4()}/deliveries", headers=a.headers)
    assert missing.status_code == 404


def test_a_superseded_memory_is_an_event(
    settings: Settings, pool: Any, pipeline: Any, agent_id: str
) -> None:
    """remember on the query service (behind the write API) supersedes a memory: its delivery
    is recorded in the same transaction (sent by whichever dispatcher or sweep runs)."""
    allowed = settings.model_copy(update={"webhook_allow_private": True})
    with topology(allowed, pool, pipeline) as t, Client(t) as api:
        body = {"url": "http://127.0.0.1:9/hook", "events": ["memory.superseded"]}
        hook = api.post("/api/webhooks", json=body).json()  # the default tenant (auth off)
        try:
            said = {"content": "Alice lives in Paris."}
            first = api.post(f"/api/agents/{agent_id}/remember", json=said).json()
            moved = {"content": "Alice moved to Berlin."}
            second = api.post(f"/api/agents/{agent_id}/remember", json=moved).json()
            assert second["decision"] == "SUPERSEDE", second
            answer = api.get(f"/api/webhooks/{hook['id']}/deliveries").json()
            (delivery,) = answer["deliveries"]
            assert delivery["event_type"] == "memory.superseded"
            data = delivery["payload"]["data"]
            assert data.pop("reason")  # the rule's words
            assert data == {
                "agent_id": agent_id,
                "memory_id": first["memory_id"],
                "superseded_by": second["memory_id"],
            }
        finally:
            assert api.delete(f"/api/webhooks/{hook['id']}").status_code == 204
