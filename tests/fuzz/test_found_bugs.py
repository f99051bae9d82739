"""Regression tests for what the schema fuzzers found (each was a 500, a non-JSON error body, or
an item accepted that the pipeline then could not process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


def _error(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return str(response.json()["error"]["code"])


def _rows(pool: Any, agent_id: str) -> int:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM documents WHERE agent_id = %(a)s)"
            " + (SELECT count(*) FROM agents WHERE agent_id = %(a)s) AS n",
            {"a": agent_id},
        ).fetchone()
    return int(row["n"])


def test_framework_errors_use_the_json_error_format(inline_api: Any) -> None:
    body = b'{"agent_id": "\xff\xfe"}'  # not UTF-8: FastAPI's own 400
    response = inline_api.post(
        "/api/memories/batch", content=body, headers={"content-type": "application/json"}
    )
    assert _error(response, 400) == "invalid_json"
    assert _error(inline_api.get("/api/no-such-route"), 404) == "not_found"
    response = inline_api.get("/api/memories/batch")
    assert _error(response, 405) == "method_not_allowed"
    assert "POST" in response.headers["allow"]


@pytest.mark.parametrize(
    "item",
    [
        {"content": "Alice: nul \u0000 inside"},
        {"content": "Alice: fine", "context": "nul \u0000"},
        {"content": "Alice: fine", "speaker": "\ud800"},
        {"content": "Alice: fine", "metadata": {"key\udbf8": 1}},
        {"content": "Alice: fine", "metadata": {"key": "\udfff"}},
        {"content": "Alice: fine", "event_date": "2024-01-01T00:00:00+23:28"},
        {"content": "Alice: fine", "event_date": "0001-01-01T00:00:00+15:00"},
    ],
)
def test_unstorable_items_are_refused_with_422(
    inline_api: Any, pool: Any, agent_id: str, item: dict[str, Any]
) -> None:
    # json= would refuse to encode lone surrogates; json.dumps writes them as \u escapes
    raw = json.dumps({"agent_id": agent_id, "items": [item]})
    response = inline_api.post(
        "/api/memories/batch", content=raw, headers={"content-type": "application/json"}
    )
    assert _error(response, 422) == "validation_error"
    assert _rows(pool, agent_id) == 0


def test_unstorable_document_id_is_refused(inline_api: Any, pool: Any, agent_id: str) -> None:
    raw = json.dumps(
        {"agent_id": agent_id, "document_id": "doc\ud800", "items": [{"content": "x"}]}
    )
    response = inline_api.post(
        "/api/memories/batch", content=raw, headers={"content-type": "application/json"}
    )
    assert _error(response, 422) == "validation_error"
    assert _rows(pool, agent_id) == 0


def test_text_the_database_cannot_store_is_a_422_not_a_500(
    inline_api: Any, query_api: Any, pool: Any, agent_id: str
) -> None:
    response = inline_api.put(f"/api/agents/{agent_id}", json={"background": "a\u0000b"})
    assert _error(response, 422) == "invalid_text"
    assert _rows(pool, agent_id) == 0
    response = query_api.post("/api/search", json={"agent_id": agent_id, "query": "a\u0000b"})
    assert _error(response, 422) == "validation_error"  # refused by the request model
    response = query_api.post(
        "/api/search",
        content=json.dumps({"agent_id": agent_id, "query": "a\ud800"}),
        headers={"content-type": "application/json"},
    )
    assert _error(response, 422) == "validation_error"


@pytest.mark.parametrize(
    "path", ["/api/agents", "/api/agents/{a}/documents", "/api/agents/{a}/opinions"]
)
def test_offsets_beyond_bigint_are_refused(inline_api: Any, agent_id: str, path: str) -> None:
    url = path.format(a=agent_id) + "?offset=3247447794398079564640467653052334080"
    assert _error(inline_api.get(url), 422) == "validation_error"


def test_a_year_that_ends_in_10000_is_processed(inline_api: Any, agent_id: str) -> None:
    body = {
        "agent_id": agent_id,
        "items": [{"content": "Alice: we will meet again in 9999, or on December 31, 9999."}],
    }
    response = inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    op = inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed", op
    assert op["counts"]["units"] == 1
