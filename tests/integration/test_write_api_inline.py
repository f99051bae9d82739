"""The write API over real PostgreSQL, with stages run inline."""

from __future__ import annotations

from typing import Any

ITEMS = [
    {
        "content": "Alice: I started working at Google last week!\n"
        "Bob: Congrats Alice! Is your office in Mountain View?",
        "context": "career discussion",
        "event_date": "2024-01-15T10:00:00Z",
    },
    {"content": "Alice loves hiking in Yosemite National Park. She goes every weekend."},
]


def _post(api: Any, agent_id: str, document_id: str, items: list[dict[str, Any]] = ITEMS) -> Any:
    return api.post(
        "/api/memories/batch",
        json={"agent_id": agent_id, "items": items, "document_id": document_id},
    )


def test_batch_is_processed_into_units_entities_and_links(
    inline_api: Any, agent_id: str, pool: Any
) -> None:
    response = _post(inline_api, agent_id, "conversation_001")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert body["items_count"] == 2 and body["document_id"] == "conversation_001"
    assert body["status"] == "created"
    op = inline_api.get(f"/api/operations/{body['operation_id']}").json()
    assert op["status"] == "completed"
    assert set(op["stages"]) == {"extract", "embed", "entities", "links", "index_messages"}
    assert all(s["status"] == "done" for s in op["stages"].values())
    with pool.connection() as conn:
        units = conn.execute(
            "SELECT text, embedding IS NOT NULL AS embedded, occurred_start FROM memory_units "
            "WHERE agent_id = %s ORDER BY item_index, seq",
            (agent_id,),
        ).fetchall()
        names = {
            r["canonical_name"]
            for r in conn.execute(
                "SELECT canonical_name FROM entities WHERE agent_id = %s", (agent_id,)
            )
        }
        links = conn.execute(
            "SELECT count(*) AS n FROM memory_links l JOIN memory_units u ON u.id = l.from_unit "
            "WHERE u.agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert [u["text"] for u in units][:2] == [
        "Alice: I started working at Google last week!",
        "Bob: Congrats Alice! Is your office in Mountain View?",
    ]
    assert all(u["embedded"] for u in units)
    assert units[0]["occurred_start"] is not None  # "last week" normalised
    assert {"Alice", "Google"} <= names
    assert links["n"] > 0
    assert op["counts"]["units"] == len(units)


def test_identical_repost_creates_nothing(inline_api: Any, agent_id: str, pool: Any) -> None:
    first = _post(inline_api, agent_id, "doc-a").json()
    second = _post(inline_api, agent_id, "doc-a").json()
    assert second["status"] == "unchanged"
    assert second["operation_id"] == first["operation_id"]
    with pool.connection() as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM memory_units WHERE agent_id = %(a)s) AS units, "
            "(SELECT count(*) FROM operations WHERE agent_id = %(a)s) AS ops, "
            "(SELECT count(*) FROM documents WHERE agent_id = %(a)s) AS docs",
            {"a": agent_id},
        ).fetchone()
    assert counts == {"units": 2 + 1, "ops": 1, "docs": 1}


def test_changed_content_replaces_the_documents_memories(
    inline_api: Any, agent_id: str, pool: Any
) -> None:
    _post(inline_api, agent_id, "doc-b")
    replaced = _post(
        inline_api, agent_id, "doc-b", [{"content": "Carol moved to Berlin in 2021."}]
    ).json()
    assert replaced["status"] == "replaced"
    with pool.connection() as conn:
        texts = [
            r["text"]
            for r in conn.execute("SELECT text FROM memory_units WHERE agent_id = %s", (agent_id,))
        ]
        names = {
            r["canonical_name"]
            for r in conn.execute(
                "SELECT canonical_name FROM entities WHERE agent_id = %s", (agent_id,)
            )
        }
    assert texts == ["Carol moved to Berlin in 2021."]
    assert "Google" not in names  # orphaned entities of the old content are gone


def test_list_and_delete_documents(inline_api: Any, agent_id: str, pool: Any) -> None:
    _post(inline_api, agent_id, "doc-c")
    listed = inline_api.get(f"/api/agents/{agent_id}/documents").json()
    assert [d["document_id"] for d in listed["documents"]] == ["doc-c"]
    assert listed["documents"][0]["unit_count"] == 3
    deleted = inline_api.delete(f"/api/agents/{agent_id}/documents/doc-c").json()
    assert deleted["deleted"]["units_deleted"] == 3
    with pool.connection() as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM memory_units WHERE agent_id = %(a)s) AS units, "
            "(SELECT count(*) FROM entities WHERE agent_id = %(a)s) AS entities",
            {"a": agent_id},
        ).fetchone()
    assert left == {"units": 0, "entities": 0}
    again = inline_api.delete(f"/api/agents/{agent_id}/documents/doc-c")
    assert again.status_code == 200 and again.json()["deleted"]["units_deleted"] == 0
