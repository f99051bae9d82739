"""Bad input gets a clear 4xx JSON error, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

BIG = "x" * (11 * 1024 * 1024)


def _count(pool: Any, agent_id: str) -> int:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM agents WHERE agent_id = %(a)s) "
            "+ (SELECT count(*) FROM documents WHERE agent_id = %(a)s) "
            "+ (SELECT count(*) FROM operations WHERE agent_id = %(a)s) "
            "+ (SELECT count(*) FROM memory_units WHERE agent_id = %(a)s) AS n",
            {"a": agent_id},
        ).fetchone()
    return int(row["n"])


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("malformed_json", 400, "invalid_json"),
        ("missing_items", 422, "validation_error"),
        ("missing_content", 422, "validation_error"),
        ("empty_content", 422, "validation_error"),
        ("blank_content", 422, "validation_error"),
        ("empty_items", 422, "validation_error"),
        ("invalid_date", 422, "validation_error"),
        ("unknown_field", 422, "validation_error"),
        ("oversized_payload", 413, "payload_too_large"),
        ("content_too_long", 422, "content_too_long"),
    ],
)
def test_bad_batches_are_rejected_and_write_nothing(
    inline_api: Any, pool: Any, agent_id: str, case: str, status: int, code: str
) -> None:
    item: dict[str, Any] = {"content": "Alice moved to Lisbon."}
    body: dict[str, Any] = {"agent_id": agent_id, "items": [item]}
    raw: bytes | None = None
    if case == "malformed_json":
        raw = b'{"agent_id": "' + agent_id.encode() + b'", "items": [{"content": "x"}'
    elif case == "missing_items":
        del body["items"]
    elif case == "missing_content":
        body["items"] = [{"context": "no content"}]
    elif case == "empty_content":
        item["content"] = ""
    elif case == "blank_content":
        item["content"] = " \n\t "
    elif case == "empty_items":
        body["items"] = []
    elif case == "invalid_date":
        item["event_date"] = "the day after tomorrow-ish"
    elif case == "unknown_field":
        item["contnet"] = "typo"
    elif case == "oversized_payload":
        item["content"] = BIG
    elif case == "content_too_long":
        item["content"] = "y" * 200_001
    if raw is not None:
        response = inline_api.post(
            "/api/memories/batch", content=raw, headers={"content-type": "application/json"}
        )
    else:
        response = inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == code
    assert _count(pool, agent_id) == 0


@pytest.mark.parametrize(
    "bad_agent", ["", "has space", "semi;colon", "slash/y", "a" * 200, "é-accent", "-lead"]
)
def test_bad_agent_ids_are_rejected(inline_api: Any, bad_agent: str) -> None:
    response = inline_api.post(
        "/api/memories/batch",
        json={"agent_id": bad_agent, "items": [{"content": "hello world there"}]},
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"
    with inline_api.app.state.pool.connection() as conn:
        assert (
            conn.execute("SELECT 1 FROM agents WHERE agent_id = %s", (bad_agent,)).fetchone()
            is None
        )


def test_too_many_items(inline_api: Any, pool: Any, agent_id: str) -> None:
    items = [{"content": f"fact number {i} about Alice"} for i in range(1001)]
    response = inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": items})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "too_many_items"
    assert _count(pool, agent_id) == 0


def test_unknown_operation_is_404_json(inline_api: Any) -> None:
    response = inline_api.get("/api/operations/00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert inline_api.get("/api/operations/not-a-uuid").status_code == 422
