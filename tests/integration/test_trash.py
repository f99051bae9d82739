"""The trash (issue 57, item 2): `DELETE .../documents/{id}?soft=true` takes a conversation and
what was learned from it out of memory search, conversation search and think, restorably;
`POST .../restore` brings it back; the document_expiry job deletes it for real past the trash's
retention, and temporary chats past theirs. The write API with stages inline for the rules,
real Celery workers and the query service's routes for the searches."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.jobs import JOBS, JobContext, JobResult, run_job
from memora.pipeline.backend import InlineBackend
from memora.store.purge import remaining
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from tests.conftest import own_database, wait_until
from tests.fakes import FakeOpenAI, Reply
from tests.integration.test_channels import _items

pytestmark = pytest.mark.integration

# A conversation written for these tests: the Lisbon trip, and one about something else.
TRIP = [
    ("Maya", "user", "I booked the flights to Lisbon for the conference in June."),
    ("Leo", "assistant", "Lisbon in June is lovely, do you need a hotel near the venue?"),
    ("Maya", "user", "Yes please, something walkable from the Lisbon congress centre."),
]
GARDEN = [("Maya", "user", "My tomatoes finally ripened on the balcony garden.")]


def _append(
    api: Any, agent: str, conversation: str, turns: Any, prefix: str = "", **extra: Any
) -> Any:
    """The turns appended to the conversation, with message ids its initial, `prefix` and
    their position (t0, t1...)."""
    path = f"/api/agents/{agent}/conversations/{conversation}/messages"
    ids = conversation[:1] + prefix
    return api.post(path, json={"messages": _items(turns, ids), **extra})


def _document(agent: str, document_id: str) -> str:
    return f"/api/agents/{agent}/documents/{document_id}"


def _units(pool: Any, agent: str, document_id: str) -> dict[str, tuple[str, str | None]]:
    """The document's units: id -> (status, trashed_from)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT u.id, u.status, u.trashed_from FROM memory_units u "
            "JOIN documents d ON d.id = u.document_pk "
            "WHERE d.agent_id = %s AND d.document_id = %s",
            (agent, document_id),
        ).fetchall()
    return {str(r["id"]): (r["status"], r["trashed_from"]) for r in rows}


def _searchable(pool: Any, unit_ids: list[str]) -> int:
    """Rows of these units in the tables the retrievers read."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM memory_vectors WHERE unit_id = ANY(%(u)s::uuid[]))"
            " + (SELECT count(*) FROM memory_search WHERE unit_id = ANY(%(u)s::uuid[])) AS n",
            {"u": unit_ids},
        ).fetchone()
    return int(row["n"])


def _age(pool: Any, agent: str, document_id: str, column: str, days: float) -> None:
    with pool.connection() as conn:
        conn.execute(
            f"UPDATE documents SET {column} = {column} - %s "
            "WHERE agent_id = %s AND document_id = %s",
            (timedelta(days=days), agent, document_id),
        )


def _expire(settings: Settings, pool: Any, pipeline: Any, agent: str) -> JobResult:
    ctx = JobContext(settings, pool, InlineBackend(pipeline), agent_key=agent)
    return run_job(JOBS["document_expiry"], ctx)


def _error(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


# ------------------------------------------------------------------------ the rules, inline
def test_soft_delete_answers_like_a_delete_with_the_trash_state(
    inline_api: Any, pool: Any, agent_id: str, settings: Settings
) -> None:
    assert _append(inline_api, agent_id, "trip", TRIP).status_code == 202
    units = _units(pool, agent_id, "trip")
    assert units and {s for s, _ in units.values()} == {"active"}

    soft = inline_api.delete(_document(agent_id, "trip"), params={"soft": "true"})
    assert soft.status_code == 200, soft.text
    body = soft.json()
    assert set(body) == {
        "success", "agent_id", "document_id", "deleted", "state", "trashed_at", "purge_after"
    }  # fmt: skip
    assert body["success"] and body["state"] == "trashed" and body["document_id"] == "trip"
    counts = body["deleted"]
    assert set(counts) == {"units_trashed", "messages_hidden", "chunks_hidden"}
    assert (counts["units_trashed"], counts["messages_hidden"]) == (len(units), 3)
    assert counts["chunks_hidden"] > 0
    trashed_at = datetime.fromisoformat(body["trashed_at"])
    assert datetime.fromisoformat(body["purge_after"]) - trashed_at == timedelta(
        days=settings.trash_retention_days
    )
    assert {v for v in _units(pool, agent_id, "trip").values()} == {("trashed", "active")}
    assert _searchable(pool, list(units)) == 0

    # idempotent: zero counts, the same dates
    again = inline_api.delete(_document(agent_id, "trip"), params={"soft": "true"}).json()
    assert again["deleted"]["already_trashed"] is True and again["deleted"]["units_trashed"] == 0
    assert again["trashed_at"] == body["trashed_at"] and again["state"] == "trashed"
    absent = inline_api.delete(_document(agent_id, "never"), params={"soft": "true"})
    assert absent.status_code == 200 and absent.json()["state"] == "absent"
    assert absent.json()["deleted"]["already_absent"] is True

    # the listing leaves it out, the trash lists it, the document itself still reads
    listed = inline_api.get(f"/api/agents/{agent_id}/documents").json()["documents"]
    assert [d["document_id"] for d in listed] == []
    trash = inline_api.get(f"/api/agents/{agent_id}/documents", params={"trashed": "true"})
    assert [(d["document_id"], d["trashed_at"] is not None) for d in trash.json()["documents"]] == [
        ("trip", True)
    ]
    detail = inline_api.get(_document(agent_id, "trip")).json()
    assert detail["trashed_at"] and detail["purge_after"] and len(detail["items"]) == 3


def test_writes_to_a_trashed_conversation_are_refused(
    inline_api: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    _append(inline_api, agent_id, "trip", TRIP)
    unit = next(iter(_units(pool, agent_id, "trip")))
    inline_api.delete(_document(agent_id, "trip"), params={"soft": "true"})

    more = _append(inline_api, agent_id, "trip", GARDEN)
    assert _error(more) == (409, "document_trashed")
    assert "restore" in more.json()["error"]["message"]
    batch = {"agent_id": agent_id, "document_id": "trip", "items": [{"content": "Maya: hi"}]}
    assert _error(inline_api.post("/api/memories/batch", json=batch)) == (409, "document_trashed")
    edit = inline_api.patch(f"{_document(agent_id, 'trip')}/messages/t0", json={"content": "x"})
    assert _error(edit) == (409, "document_trashed")
    # one memory of it is restored with its document only
    restored = query_api.post(f"/api/agents/{agent_id}/memories/{unit}/restore")
    assert _error(restored) == (409, "document_trashed")
    with pool.connection() as conn:
        messages = conn.execute(
            "SELECT count(*) AS n FROM conversation_messages m JOIN documents d "
            "ON d.id = m.document_pk WHERE d.agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert messages["n"] == 3  # nothing was written


def test_restore_gives_each_unit_its_status_back(
    inline_api: Any, pool: Any, agent_id: str, settings: Settings
) -> None:
    _append(inline_api, agent_id, "trip", TRIP)
    forgotten, replaced, *active = sorted(_units(pool, agent_id, "trip"))
    until = datetime(2024, 4, 1, tzinfo=UTC)
    searchable = _searchable(pool, active)
    assert searchable > 0
    with pool.connection() as conn:  # as forget and a supersede leave them
        conn.execute("UPDATE memory_units SET status = 'forgotten' WHERE id = %s", (forgotten,))
        conn.execute(
            "UPDATE memory_units SET status = 'superseded', valid_until = %s WHERE id = %s",
            (until, replaced),
        )
    path = _document(agent_id, "trip")
    assert _error(inline_api.post(f"{path}/restore")) == (409, "not_trashed")
    assert _error(inline_api.post(f"{_document(agent_id, 'never')}/restore")) == (404, "not_found")

    trashed = inline_api.delete(path, params={"soft": "true"}).json()
    assert trashed["deleted"]["units_trashed"] == 1 + len(active)
    assert _units(pool, agent_id, "trip")[replaced] == ("trashed", "superseded")
    assert _units(pool, agent_id, "trip")[forgotten] == ("forgotten", None)

    restored = inline_api.post(f"{path}/restore")
    assert restored.status_code == 200, restored.text
    assert restored.json() == {
        "success": True, "agent_id": agent_id, "document_id": "trip", "state": "active",
        "restored": {"units_restored": 1 + len(active), "messages_restored": 3,
                     "chunks_restored": trashed["deleted"]["chunks_hidden"]},
    }  # fmt: skip
    after = _units(pool, agent_id, "trip")
    assert after[forgotten] == ("forgotten", None) and after[replaced] == ("superseded", None)
    assert {after[u] for u in active} == {("active", None)}
    assert _searchable(pool, active) == searchable
    with pool.connection() as conn:
        kept = conn.execute(
            "SELECT valid_until FROM memory_units WHERE id = %s", (replaced,)
        ).fetchone()
        events = conn.execute(
            "SELECT event, details->>'to' AS status FROM memory_events "
            "WHERE unit_id = %s ORDER BY id",
            (replaced,),
        ).fetchall()
    assert kept["valid_until"] == until
    assert [(e["event"], e["status"]) for e in events] == [
        ("trashed", None), ("restored", "superseded")
    ]  # fmt: skip
    assert inline_api.get(f"/api/agents/{agent_id}/documents").json()["documents"]

    # past the retention: 410, as a memory's restore
    inline_api.delete(path, params={"soft": "true"})
    _age(pool, agent_id, "trip", "trashed_at", settings.trash_retention_days + 1)
    assert _error(inline_api.post(f"{path}/restore")) == (410, "retention_expired")


def test_a_trashed_document_can_be_deleted_for_real(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    _append(inline_api, agent_id, "trip", TRIP)
    units = _units(pool, agent_id, "trip")
    live = inline_api.delete(_document(agent_id, "other"))
    # a hard delete answers as it always did: no trash fields
    assert set(live.json()) == {"success", "agent_id", "document_id", "deleted"}
    inline_api.delete(_document(agent_id, "trip"), params={"soft": "true"})
    hard = inline_api.delete(_document(agent_id, "trip"))
    assert hard.status_code == 200 and set(hard.json()) == {
        "success", "agent_id", "document_id", "deleted"
    }  # fmt: skip
    assert hard.json()["deleted"]["units_deleted"] == len(units)
    assert hard.json()["deleted"]["remaining"] == 0
    assert inline_api.get(_document(agent_id, "trip")).status_code == 404


def test_trash_and_restore_send_their_webhook_events(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO webhooks (tenant_id, url, events, secret) VALUES ('default', "
            "'https://example.com/trash', '{document.trashed,document.restored}', 's')"
        )
    try:
        _append(inline_api, agent_id, "trip", TRIP)
        inline_api.delete(_document(agent_id, "trip"), params={"soft": "true"})
        inline_api.post(f"{_document(agent_id, 'trip')}/restore")
        with pool.connection() as conn:
            sent = conn.execute(
                "SELECT event_type, payload->'data' AS data FROM webhook_deliveries "
                "WHERE payload->'data'->>'agent_id' = %s ORDER BY created_at",
                (agent_id,),
            ).fetchall()
    finally:
        with pool.connection() as conn:
            conn.execute("DELETE FROM webhooks WHERE url = 'https://example.com/trash'")
    assert [s["event_type"] for s in sent] == ["document.trashed", "document.restored"]
    trashed, restored = (s["data"] for s in sent)
    assert trashed["state"] == "trashed" and trashed["deleted"]["units_trashed"] > 0
    assert trashed["purge_after"] and trashed["document_id"] == "trip"
    assert restored["restored"]["units_restored"] == trashed["deleted"]["units_trashed"]


# ----------------------------------------------------------------------------- the migration
def _row_unit(conn: Any, document: Any, seq: int, status: str | None = None) -> str:
    """A unit inserted by COPY, as the pipeline inserts them (no status given: the default)."""
    unit = str(uuid4())
    row = [unit, "al", document, seq, "x", "world", TRASHED_AT, TRASHED_AT]
    columns = "id, agent_id, document_pk, seq, text, fact_type, event_date, mentioned_at"
    if status is not None:
        row, columns = [*row, status], f"{columns}, status"
    with conn.cursor() as cur, cur.copy(f"COPY memory_units ({columns}) FROM STDIN") as copy:
        copy.write_row(row)
    return unit


TRASHED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_0035_writes_a_trashed_documents_units_trashed_and_is_reversible(pg_url: str) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from memora.db.migrate import downgrade, upgrade

    def statuses(url: str) -> dict[str, str]:
        with psycopg.connect(url, row_factory=dict_row) as conn:
            rows = conn.execute("SELECT id, status FROM memory_units").fetchall()
        return {str(r["id"]): r["status"] for r in rows}

    with own_database(pg_url, "memora_trash") as url:
        with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
            conn.execute("INSERT INTO agents (agent_id) VALUES ('al')")
            docs = {
                name: conn.execute(
                    "INSERT INTO documents (agent_id, document_id, content_hash, items, "
                    "item_count, trashed_at) VALUES ('al', %s, '', '[]', 0, %s) RETURNING id",
                    (name, at),
                ).fetchone()["id"]
                for name, at in (("live", None), ("gone", TRASHED_AT))
            }
            live = _row_unit(conn, docs["live"], 0)
            new, replaced, forgotten = (
                _row_unit(conn, docs["gone"], seq, status)
                for seq, status in enumerate((None, "superseded", "forgotten"))
            )
            born = conn.execute(
                "SELECT id::text, trashed_from, status_at IS NOT NULL AS dated FROM memory_units "
                "WHERE status = 'trashed' ORDER BY trashed_from"
            ).fetchall()
        assert [(b["id"], b["trashed_from"], b["dated"]) for b in born] == [
            (new, "active", True), (replaced, "superseded", True)
        ]  # fmt: skip
        assert statuses(url)[live] == "active" and statuses(url)[forgotten] == "forgotten"
        downgrade(url, 384, "0034_channels")
        assert statuses(url) == {
            live: "active", new: "active", replaced: "superseded", forgotten: "forgotten"
        }  # fmt: skip
        upgrade(url, 384)  # and again


# ------------------------------------------------------------- through real workers, searched
def _completed(api: Any, response: Any) -> None:
    assert response.status_code in (200, 202), response.text
    path = f"/api/operations/{response.json()['operation_id']}"
    status = wait_until(
        lambda: (s := api.get(path).json()["status"]) in ("completed", "failed") and s, 120
    )
    assert status == "completed", api.get(path).json()


def _found(query_api: TestClient, agent: str) -> dict[str, set[str]]:
    """What memory search and conversation search find of the trip, as texts / message ids."""
    memories = query_api.post(
        "/api/search", json={"agent_id": agent, "query": "Lisbon conference flights hotel"}
    )
    conversations = query_api.post(
        "/api/conversation_search",
        json={"agent_id": agent, "query": "Lisbon conference", "limit": 20, "min_score": 0},
    )
    assert memories.status_code == 200 and conversations.status_code == 200
    return {
        "memory": {r["text"] for r in memories.json()["results"] if "Lisbon" in r["text"]},
        "conversation": {
            m for h in conversations.json()["results"] for m in h["message_ids"]
            if h["conversation_id"] == "trip"
        },
    }  # fmt: skip


def _thought(think_api: TestClient, fake_llm: FakeOpenAI, agent: str) -> set[str]:
    """The memories of the trip think answered from."""
    fake_llm.script(Reply("Maya is going to Lisbon."), when=THINK_MARKER)
    fake_llm.script(Reply({"opinions": []}), when=OPINION_MARKER)
    r = think_api.post("/api/think", json={"agent_id": agent, "query": "Where is Maya flying?"})
    assert r.status_code == 200, r.text
    return {e["text"] for facts in r.json()["based_on"].values() for e in facts
            if "Lisbon" in e["text"]}  # fmt: skip


@pytest.fixture()
def think_api(llm_settings: Settings, pool: Any, pipeline: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    app = create_app(llm_settings, pool=pool, backend=InlineBackend(pipeline))
    with TestClient(app) as client:
        yield client


def test_trash_restore_and_expiry_through_the_workers(
    celery_api: Any,
    query_api: TestClient,
    think_api: TestClient,
    fake_llm: FakeOpenAI,
    pool: Any,
    pipeline: Any,
    settings: Settings,
    agent_id: str,
) -> None:
    _completed(celery_api, _append(celery_api, agent_id, "trip", TRIP))
    _completed(celery_api, _append(celery_api, agent_id, "garden", GARDEN))
    before = _found(query_api, agent_id)
    assert before["memory"] and before["conversation"] == {"t0", "t1", "t2"}
    assert _thought(think_api, fake_llm, agent_id)

    path = _document(agent_id, "trip")
    assert celery_api.delete(path, params={"soft": "true"}).json()["state"] == "trashed"
    assert _found(query_api, agent_id) == {"memory": set(), "conversation": set()}
    assert _thought(think_api, fake_llm, agent_id) == set()

    assert celery_api.post(f"{path}/restore").status_code == 200
    assert _found(query_api, agent_id) == before
    assert _thought(think_api, fake_llm, agent_id)

    # in the trash past the retention: the job deletes it, every row of it
    celery_api.delete(path, params={"soft": "true"})
    with pool.connection() as conn:
        pk = conn.execute(
            "SELECT id FROM documents WHERE agent_id = %s AND document_id = 'trip'", (agent_id,)
        ).fetchone()["id"]
    assert _expire(settings, pool, pipeline, agent_id).changed == 0  # not yet
    _age(pool, agent_id, "trip", "trashed_at", settings.trash_retention_days + 1)
    result = _expire(settings, pool, pipeline, agent_id)
    assert result.changed == 1 and result.details["trash"] == 1
    with pool.connection() as conn:
        assert remaining(conn, [pk], "document_pk").total == 0
        assert (
            conn.execute("SELECT count(*) AS n FROM documents WHERE id = %s", (pk,)).fetchone()["n"]
            == 0
        )
    assert celery_api.get(path).status_code == 404
    assert celery_api.get(_document(agent_id, "garden")).status_code == 200


def test_temporary_chats_expire(
    celery_api: Any, pool: Any, pipeline: Any, settings: Settings, agent_id: str
) -> None:
    _completed(celery_api, _append(celery_api, agent_id, "secret", GARDEN, temporary=True))
    _completed(celery_api, _append(celery_api, agent_id, "mixed", GARDEN, temporary=True))
    _completed(celery_api, _append(celery_api, agent_id, "mixed", TRIP[:1], prefix="r"))
    _completed(celery_api, _append(celery_api, agent_id, "kept", TRIP))
    days = settings.temporary_chat_retention_days
    assert days is not None
    for document_id in ("secret", "mixed", "kept"):
        _age(pool, agent_id, document_id, "updated_at", days - 1)
    assert _expire(settings, pool, pipeline, agent_id).changed == 0  # not yet
    for document_id in ("secret", "mixed", "kept"):
        _age(pool, agent_id, document_id, "updated_at", 2)
    result = _expire(settings, pool, pipeline, agent_id)
    assert result.changed == 1 and result.details["temporary"] == 1
    assert celery_api.get(_document(agent_id, "secret")).status_code == 404
    # a conversation with a message to remember is no temporary chat; nor is an ordinary one
    assert celery_api.get(_document(agent_id, "mixed")).status_code == 200
    assert celery_api.get(_document(agent_id, "kept")).status_code == 200
    off = settings.model_copy(update={"temporary_chat_retention_days": None})
    assert _expire(off, pool, pipeline, agent_id).examined == 0


def test_a_conversation_trashed_while_it_is_processed_keeps_no_active_memory(
    celery_api: Any, pool: Any, agent_id: str
) -> None:
    accepted = _append(celery_api, agent_id, "trip", TRIP)
    # at once: the append's stages write the conversation's units after this
    trashed = celery_api.delete(_document(agent_id, "trip"), params={"soft": "true"})
    assert trashed.status_code == 200 and trashed.json()["state"] == "trashed"
    _completed(celery_api, accepted)
    units = _units(pool, agent_id, "trip")
    assert units and set(units.values()) == {("trashed", "active")}
    assert _searchable(pool, list(units)) == 0
    restored = celery_api.post(f"{_document(agent_id, 'trip')}/restore").json()
    assert restored["restored"]["units_restored"] == len(units)
    assert set(_units(pool, agent_id, "trip").values()) == {("active", None)}
