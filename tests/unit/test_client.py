"""memora_client without a server: its models match the API's schemas field for field, error
answers become the exceptions that carry their code, 429 and 503 are retried after their
Retry-After, and the generated async client is up to date."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import memora_client
from memora_client import AsyncMemoraClient, MemoraClient, errors
from memora_client import models as m
from services.api.schemas import (
    agents,
    conversations,
    lifecycle,
    memories,
    operations,
    search,
    usage,
    webhooks,
)
from services.api.schemas import think as think_schemas

REPO = Path(__file__).resolve().parents[2]
OPERATION = {
    "id": "6f1c1b0e-5a0e-4a43-9f39-1d0c2f1f6d11",
    "agent_id": "a",
    "kind": "ingest",
    "document_id": "d",
    "status": "completed",
    "stage": None,
    "stages": {},
    "counts": {"units": 1},
    "error": None,
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
    "finished_at": "2026-01-01T00:00:01Z",
}

# (the client's model, the API's): the same fields, so a rename on either side fails here
SAME_FIELDS: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (m.MemoryItem, memories.MemoryItem),
    (m.Message, conversations.AppendedMessage),
    (m.BatchRequest, memories.BatchRequest),
    (m.BatchAccepted, memories.BatchResponse),
    (m.AppendRequest, conversations.AppendRequest),
    (m.AppendAccepted, conversations.AppendResponse),
    (m.Operation, operations.OperationResponse),
    (m.StageStatus, operations.StageStatus),
    (m.OperationList, operations.OperationList),
    (m.SearchRequest, search.SearchRequest),
    (m.SearchResult, search.SearchResult),
    (m.SearchResponse, search.SearchResponse),
    (m.FollowUp, search.FollowUp),
    (m.FollowUpError, search.FollowUpError),
    (m.LLMUsage, usage.LLMUsage),
    (m.ThinkRequest, think_schemas.ThinkRequest),
    (m.ThinkResponse, think_schemas.ThinkResponse),
    (m.BasedOn, think_schemas.BasedOn),
    (m.NewOpinion, think_schemas.NewOpinion),
    (m.ConversationSearchRequest, conversations.ConversationSearchRequest),
    (m.ConversationResult, conversations.ConversationResult),
    (m.ConversationSearchResponse, conversations.ConversationSearchResponse),
    (m.TimeRange, conversations.TimeRange),
    (m.RememberRequest, lifecycle.RememberRequest),
    (m.RememberResponse, lifecycle.RememberResponse),
    (m.EditRequest, lifecycle.EditRequest),
    (m.EditResponse, lifecycle.EditResponse),
    (m.ForgetRequest, lifecycle.ForgetRequest),
    (m.ForgetResponse, lifecycle.ForgetResponse),
    (m.RecallRequest, lifecycle.RecallRequest),
    (m.ReflectRequest, lifecycle.ReflectRequest),
    (m.LinkRequest, lifecycle.LinkRequest),
    (m.DocumentSummary, memories.DocumentSummary),
    (m.DocumentDetail, memories.DocumentDetail),
    (m.DocumentList, memories.DocumentList),
    (m.DocumentDeleted, memories.DeleteResponse),
    (m.DocumentRestored, memories.RestoreResponse),
    (m.Memory, memories.Memory),
    (m.Personality, agents.Personality),
    (m.AgentUpdate, agents.AgentUpdate),
    (m.AgentProfile, agents.AgentProfile),
    (m.AgentList, agents.AgentList),
    (m.AgentDeleted, agents.AgentDeleted),
    (m.AgentEvolution, agents.AgentEvolution),
    (m.OpinionVersion, agents.OpinionVersion),
    (m.OpinionList, agents.OpinionList),
    (m.OpinionHistory, agents.OpinionHistory),
    (m.WebhookCreate, webhooks.WebhookCreate),
    (m.WebhookDeliveryCounts, webhooks.DeliveryCounts),
    (m.Webhook, webhooks.Webhook),
    (m.WebhookCreated, webhooks.WebhookCreated),
    (m.WebhookList, webhooks.WebhookList),
    (m.WebhookDelivery, webhooks.Delivery),
    (m.WebhookDeliveryList, webhooks.DeliveryList),
    (m.WebhookPing, webhooks.PingResponse),
]


@pytest.mark.parametrize(("ours", "theirs"), SAME_FIELDS, ids=lambda c: c.__name__)
def test_models_have_the_api_fields(ours: type[BaseModel], theirs: type[BaseModel]) -> None:
    assert set(ours.model_fields) == set(theirs.model_fields)


def test_the_recall_reflect_and_link_answers_have_the_use_cases_keys() -> None:
    # these routes answer plain dicts (services/api/routes/lifecycle.py): their keys, by hand
    assert set(m.RecalledMemory.model_fields) == {
        "id", "text", "score", "fact_type", "category", "importance", "access_count",
        "last_accessed_at", "event_date", "metadata",
    }  # fmt: skip
    assert set(m.Reflection.model_fields) == {"id", "text", "importance", "sources"}
    assert set(m.LinkResponse.model_fields) == {
        "memory_id", "related_memory_id", "relationship", "weight"
    }  # fmt: skip


def test_the_async_client_is_generated_from_the_sync_one() -> None:
    script = REPO / "clients/python/scripts/generate_async.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    sync_methods = {n for n in vars(MemoraClient) if not n.startswith("__")}
    async_methods = {n for n in vars(AsyncMemoraClient) if not n.startswith("__")}
    assert sync_methods == async_methods


def _mock(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


def test_requests_are_the_api_bodies_paths_and_headers() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"agent_id": "a", "documents": []})

    with MemoraClient("http://memora", api_key="k1", transport=_mock(answer)) as client:
        client.list_documents("a", limit=5)
        with pytest.raises(Exception):  # noqa: B017 - the answer is not a batch: only the request matters
            client.store_batch(
                "a", ["one", {"content": "two", "speaker": "Maya"}], "chats/1 b", backfill=True
            )
    listing, batch = seen
    assert listing.url.path == "/api/agents/a/documents" and listing.url.params["limit"] == "5"
    assert listing.headers["authorization"] == "Bearer k1"
    body = json.loads(batch.content)
    assert body["document_id"] == "chats/1 b" and body["agent_id"] == "a"
    assert [i["content"] for i in body["items"]] == ["one", "two"]
    assert body["items"][1]["speaker"] == "Maya" and "title" not in body
    assert batch.headers["x-memora-priority"] == "backfill"
    with MemoraClient("http://memora", transport=_mock(answer)) as client:
        client.request("GET", "/api/agents/a/documents/chats%2F1")
    assert seen[-1].url.raw_path == b"/api/agents/a/documents/chats%2F1"
    assert "authorization" not in seen[-1].headers


def test_the_trash_calls_are_the_api_paths() -> None:
    seen: list[httpx.Request] = []
    restored = {"success": True, "agent_id": "a", "document_id": "chats/1", "state": "active",
                "restored": {"units_restored": 2}}  # fmt: skip

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "POST":
            return httpx.Response(200, json=restored)
        if request.method == "GET":
            return httpx.Response(200, json={"agent_id": "a", "documents": []})
        deleted = {"success": True, "agent_id": "a", "document_id": "chats/1", "deleted": {}}
        if request.url.params.get("soft") == "true":
            deleted |= {"state": "trashed", "trashed_at": "2026-01-01T00:00:00Z",
                        "purge_after": "2026-01-31T00:00:00Z"}  # fmt: skip
        return httpx.Response(200, json=deleted)

    with MemoraClient("http://memora", transport=_mock(answer)) as client:
        hard = client.delete_document("a", "chats/1")
        soft = client.delete_document("a", "chats/1", soft=True)
        back = client.restore_document("a", "chats/1")
        client.list_documents("a")
        client.list_documents("a", trashed=True)
    assert hard.state is None and soft.state == "trashed" and soft.purge_after is not None
    assert back.restored == {"units_restored": 2} and back.state == "active"
    paths = [(r.method, r.url.raw_path.decode()) for r in seen]
    assert paths == [
        ("DELETE", "/api/agents/a/documents/chats%2F1"),
        ("DELETE", "/api/agents/a/documents/chats%2F1?soft=true"),
        ("POST", "/api/agents/a/documents/chats%2F1/restore"),
        ("GET", "/api/agents/a/documents?limit=100&offset=0"),
        ("GET", "/api/agents/a/documents?limit=100&offset=0&trashed=true"),
    ]


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_json", errors.BadRequestError),
        (401, "unauthorized", errors.AuthenticationError),
        (404, "not_found", errors.NotFoundError),
        (409, "message_conflict", errors.ConflictError),
        (422, "validation_error", errors.UnprocessableError),
        (502, "llm_bad_output", errors.UpstreamError),
        (500, "http_error", errors.ServerError),
    ],
)
def test_error_answers_raise_with_their_code(
    status: int, code: str, cls: type[errors.APIError]
) -> None:
    body = {"error": {"code": code, "message": "no", "details": [{"loc": ["x"]}]}}
    transport = _mock(lambda _: httpx.Response(status, json=body))
    client = MemoraClient("http://memora", transport=transport)
    with client, pytest.raises(cls) as e:
        client.operation(OPERATION["id"])
    assert (e.value.status, e.value.code, e.value.message) == (status, code, "no")
    assert e.value.details == [{"loc": ["x"]}]
    assert isinstance(e.value, errors.APIError | errors.MemoraError)


def test_an_error_without_the_json_body_still_raises_by_status() -> None:
    transport = _mock(lambda _: httpx.Response(404, text="nothing here"))
    client = MemoraClient("http://memora", transport=transport)
    with client, pytest.raises(errors.NotFoundError) as e:
        client.operation(OPERATION["id"])
    assert e.value.code == "http_error"


def _flaky(statuses: list[int], after: str | None) -> tuple[httpx.MockTransport, list[float]]:
    """Answers `statuses` in turn (with Retry-After `after`), then the operation."""
    times: list[float] = []

    def answer(_: httpx.Request) -> httpx.Response:
        times.append(time.monotonic())
        if len(times) <= len(statuses):
            headers = {"Retry-After": after} if after else {}
            body = {"error": {"code": "rate_limited", "message": "slow down"}}
            return httpx.Response(statuses[len(times) - 1], json=body, headers=headers)
        return httpx.Response(200, json=OPERATION)

    return _mock(answer), times


def test_429_and_503_are_retried_with_back_off() -> None:
    transport, times = _flaky([429, 503], None)
    with MemoraClient("http://memora", transport=transport, backoff=0.01) as client:
        assert client.operation(OPERATION["id"]).status == "completed"
    assert len(times) == 3


def test_retries_end_with_the_error_and_its_retry_after() -> None:
    transport, times = _flaky([429] * 5, "0")
    client = MemoraClient("http://memora", transport=transport, max_retries=2)
    with client, pytest.raises(errors.RateLimitedError) as e:
        client.operation(OPERATION["id"])
    assert len(times) == 3 and e.value.retry_after == 0 and e.value.code == "rate_limited"


def test_other_errors_are_not_retried() -> None:
    transport, times = _flaky([500, 500], None)
    client = MemoraClient("http://memora", transport=transport, backoff=0.01)
    with client, pytest.raises(errors.ServerError):
        client.operation(OPERATION["id"])
    assert len(times) == 1


def test_the_async_client_retries_and_raises_the_same() -> None:
    async def run() -> None:
        transport, times = _flaky([503], "0")
        async with AsyncMemoraClient("http://memora", transport=transport) as client:
            assert (await client.operation(OPERATION["id"])).status == "completed"
        assert len(times) == 2
        missing = _mock(lambda _: httpx.Response(404, json={"error": {"code": "not_found"}}))
        async with AsyncMemoraClient("http://memora", transport=missing) as client:
            with pytest.raises(errors.NotFoundError):
                await client.get_document("a", "d")

    asyncio.run(run())


@pytest.fixture()
def flaky_server() -> Iterator[tuple[str, list[float]]]:
    """A real HTTP server: 503 with Retry-After: 1 once, then the operation."""
    times: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            times.append(time.monotonic())
            status, body = (
                (503, {"error": {"code": "database_unavailable", "message": "later"}})
                if len(times) == 1
                else (200, OPERATION)
            )
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 503:
                self.send_header("Retry-After", "1")
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", times
    server.shutdown()
    thread.join(5)


def test_retry_after_is_honoured_over_http(flaky_server: tuple[str, list[float]]) -> None:
    url, times = flaky_server
    with MemoraClient(url, backoff=0.01) as client:
        operation = client.wait_for(OPERATION["id"], timeout=10)
    assert operation.finished and len(times) == 2
    assert times[1] - times[0] >= 0.95  # Retry-After: 1, not the 0.01 s back-off


def test_a_refused_connection_is_a_connection_error() -> None:
    client = MemoraClient("http://127.0.0.1:9", max_retries=1, backoff=0.01)
    with client, pytest.raises(errors.MemoraConnectionError):
        client.operation(OPERATION["id"])


def test_wait_for_raises_on_failure_and_on_timeout() -> None:
    failed = {**OPERATION, "status": "failed", "error": "boom"}
    running = {**OPERATION, "status": "running", "finished_at": None}
    with MemoraClient(
        "http://memora", transport=_mock(lambda _: httpx.Response(200, json=failed))
    ) as c:
        with pytest.raises(errors.OperationFailedError) as e:
            c.wait_for(OPERATION["id"])
        assert e.value.operation.error == "boom"
        assert c.wait_for(OPERATION["id"], raise_on_failure=False).status == "failed"
    with (
        MemoraClient(
            "http://memora", transport=_mock(lambda _: httpx.Response(200, json=running))
        ) as c,
        pytest.raises(errors.OperationTimeoutError),
    ):
        c.wait_for(OPERATION["id"], timeout=0.2, interval=0.05)


def test_the_package_exports_its_names() -> None:
    for name in memora_client.__all__:
        assert hasattr(memora_client, name)


def test_an_http_client_of_ones_own_is_used_and_left_open() -> None:
    own = httpx.Client(
        base_url="http://memora",
        headers={"X-API-Key": "k2"},
        transport=_mock(
            lambda r: httpx.Response(200, json={**OPERATION, "agent_id": r.headers["x-api-key"]})
        ),
    )
    with MemoraClient(http_client=own) as client:
        assert client.operation(OPERATION["id"]).agent_id == "k2"
    assert not own.is_closed
    own.close()
