"""Oversized bodies reach ordinary clients as a 413 JSON error, not a reset connection.

The write API runs as `memora serve` runs it (uvicorn, its own process, on the suite's
PostgreSQL and Redis). Each client sends a whole 20 MB batch, with and without keep-alive.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from memora.basics.config import Settings
from memora.infra.embedded import free_port

pytestmark = pytest.mark.integration

LIMIT = 10 * 1024 * 1024
BODY = json.dumps(
    {"agent_id": "too-big", "items": [{"content": "x" * (20 * 1024 * 1024)}]}
).encode()
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def api_url(settings: Settings, redis_url: str, data_dir: Path) -> Iterator[str]:
    from services.cli.stack import Stack

    stack = Stack(
        settings.model_copy(
            update={"broker_url": redis_url, "port": free_port(), "max_body_bytes": LIMIT}
        ),
        workers={},
        with_query=False,
        with_beat=False,
        log_dir=data_dir / "oversized-logs",
        extra_env={"MEMORA_MAX_BODY_BYTES": str(LIMIT)},
    )
    stack.start()
    try:
        stack.wait_ready(timeout=120)
        yield f"http://127.0.0.1:{stack.settings.port}"
    finally:
        stack.stop()


def _assert_413(status: int, body: bytes | str) -> None:
    assert status == 413, body
    error = json.loads(body)["error"]
    assert error["code"] == "payload_too_large"
    assert str(LIMIT) in error["message"]


def _urllib(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=BODY, headers=JSON | headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _requests(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    response = requests.post(url, data=BODY, headers=JSON | headers, timeout=60)
    return response.status_code, response.content


def _requests_chunked(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """No Content-Length: the limit is only found while reading."""

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(BODY), 256 * 1024):
            yield BODY[start : start + 256 * 1024]

    response = requests.post(url, data=chunks(), headers=JSON | headers, timeout=60)
    return response.status_code, response.content


def _httpx(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    response = httpx.post(url, content=BODY, headers=JSON | headers, timeout=60)
    return response.status_code, response.content


CLIENTS: dict[str, Any] = {
    "urllib": _urllib,
    "requests": _requests,
    "requests-chunked": _requests_chunked,
    "httpx": _httpx,
}


@pytest.mark.parametrize("connection", ["keep-alive", "close"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_20_mb_batch_gets_the_413_json_error(api_url: str, client: str, connection: str) -> None:
    url = f"{api_url}/api/memories/batch"
    for _ in range(2):  # and again: the server is still fine
        status, body = CLIENTS[client](url, {"Connection": connection})
        _assert_413(status, body)


def test_the_connection_is_closed_after_the_413(api_url: str) -> None:
    with httpx.Client(base_url=api_url, timeout=60) as client:
        response = client.post("/api/memories/batch", content=BODY, headers=JSON)
        _assert_413(response.status_code, response.content)
        assert response.headers["connection"] == "close"
        # the client opens a new connection by itself; the next request is served
        assert client.get("/health/live").status_code == 200


def test_expect_100_continue_is_answered_before_the_body_is_sent(api_url: str) -> None:
    port = int(api_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /api/memories/batch HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
            b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):  # the server closes after answering
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"100 Continue" not in head
    _assert_413(413, body)


def test_a_body_under_the_limit_is_still_accepted(api_url: str) -> None:
    body = {"agent_id": "small-enough", "items": [{"content": "Alice moved to Lisbon."}]}
    response = requests.post(f"{api_url}/api/memories/batch", json=body, timeout=60)
    assert response.status_code == 200, response.text
