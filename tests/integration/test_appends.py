"""Live conversations (issue 24): messages appended as they happen, each append processed
alone, on real PostgreSQL + pgvector with the pipeline run inline."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.extraction.llm import MARKER
from tests.fakes import FakeOpenAI, Reply

pytestmark = pytest.mark.integration

# A conversation with long and short turns, speakers, names and places (written for this test).
CHAT = [
    ("Maya", "user", "I finally booked the flights to Lisbon for the conference in June."),
    ("Leo", "assistant", "Great! Are you presenting your paper on coral reef restoration?"),
    ("Maya", "user", "Yes, with Dr. Okafor from the Kenyan marine institute."),
    ("Leo", "assistant", "Nice."),
    ("Maya", "user", "ok"),
    ("Maya", "user", "Can you remind me to renew my passport before May?"),
    ("Leo", "assistant", "Sure, I will remind you on the first of April."),
    ("Maya", "user", "thanks"),
    (
        "Maya",
        "user",
        "Also my brother Tomas wants to visit us in Porto after the conference, "
        "he has never been to Portugal and loves football.",
    ),
    ("Leo", "assistant", "Porto has great football: he could watch a match at the Dragao."),
    ("Maya", "user", "He supports Benfica though, which might be a problem in Porto."),
    ("Leo", "assistant", "Ha, then Lisbon is safer for him!"),
]


def messages(start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
    return [
        {"message_id": f"m{i:02d}", "speaker": who, "role": role, "content": text,
         "event_date": f"2024-03-01T10:{i:02d}:00Z"}
        for i, (who, role, text) in enumerate(CHAT)
    ][start:stop]  # fmt: skip


def append(api: Any, agent_id: str, conversation: str, batch: list[dict[str, Any]],
           expect: int = 202, **extra: Any) -> dict[str, Any]:  # fmt: skip
    response = api.post(
        f"/api/agents/{agent_id}/conversations/{conversation}/messages",
        json={"messages": batch, **extra},
    )
    assert response.status_code == expect, response.text
    body: dict[str, Any] = response.json()
    return body


def completed(api: Any, body: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = api.get(f"/api/operations/{body['operation_id']}").json()
    assert op["status"] == "completed", op
    return op


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


# ------------------------------------------------------------------------------ snapshot
def snapshot(pool: Any, agent_key: str) -> dict[str, Any]:
    """What the pipeline made of an agent's conversation, comparable across agents."""
    with pool.connection() as conn:
        units = conn.execute(
            "SELECT id, item_index, seq, text, fact_type, event_date, embedding IS NOT NULL AS e "
            "FROM memory_units WHERE agent_id = %s ORDER BY item_index, seq",
            (agent_key,),
        ).fetchall()
        key = {u["id"]: (u["item_index"], u["seq"]) for u in units}
        links = conn.execute(
            "SELECT l.from_unit, l.to_unit, l.link_type, round(l.weight::numeric, 3) AS w "
            "FROM memory_links l JOIN memory_units u ON u.id = l.from_unit "
            "WHERE u.agent_id = %s",
            (agent_key,),
        ).fetchall()
        mentions = conn.execute(
            "SELECT ue.unit_id, e.canonical_name FROM unit_entities ue "
            "JOIN entities e ON e.id = ue.entity_id WHERE e.agent_id = %s",
            (agent_key,),
        ).fetchall()
        chunks = conn.execute(
            "SELECT c.text, (SELECT array_agg(m.message_id ORDER BY m.position) "
            "FROM conversation_messages m WHERE m.id = ANY(c.message_pks)) AS covers "
            "FROM conversation_chunks c WHERE c.agent_id = %s ORDER BY c.text",
            (agent_key,),
        ).fetchall()
        order = conn.execute(
            "SELECT message_id FROM conversation_messages WHERE agent_id = %s ORDER BY position",
            (agent_key,),
        ).fetchall()
    return {
        "units": [
            (u["item_index"], u["seq"], u["text"], u["fact_type"], u["event_date"], u["e"])
            for u in units
        ],
        "links": sorted(
            (key[r["from_unit"]], key[r["to_unit"]], r["link_type"], r["w"]) for r in links
        ),
        "entities": sorted((key[r["unit_id"]], r["canonical_name"]) for r in mentions),
        "chunks": [(c["text"], c["covers"]) for c in chunks],
        "order": [r["message_id"] for r in order],
    }


def answers(query_api: TestClient, agent_id: str) -> list[Any]:
    out: list[Any] = []
    for query in ("passport renewal", "Tomas football Porto", "Lisbon conference"):
        hits = query_api.post(
            "/api/search", json={"agent_id": agent_id, "query": query, "max_tokens": 400}
        ).json()
        out.append([r["text"] for r in hits["results"]])
        found = query_api.post(
            "/api/conversation_search",
            json={"agent_id": agent_id, "query": query, "min_score": 0.0},
        ).json()
        out.append([(r["message_id"], round(r["score"], 4)) for r in found["results"]])
    return out


def test_appended_one_or_two_at_a_time_ends_as_posted_whole(
    inline_api: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    whole, live = f"{agent_id}-whole", f"{agent_id}-live"
    body = {"agent_id": whole, "document_id": "chat", "items": messages(), "title": "Trip"}
    response = inline_api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    completed(inline_api, response.json())

    i, sizes = 0, [1, 2]
    while i < len(CHAT):
        size = sizes[i % 2]
        done = append(inline_api, live, "chat", messages(i, i + size), title="Trip")
        assert done["messages_new"] == len(messages(i, i + size))
        assert done["status"] == ("created" if i == 0 else "appended")
        op = completed(inline_api, done)
        assert op["kind"] == "append" and op["counts"]["items"] == done["messages_new"]
        i += size

    a, b = snapshot(pool, whole), snapshot(pool, live)
    for part in ("order", "units", "entities", "chunks", "links"):
        assert a[part] == b[part], part
    assert answers(query_api, whole) == answers(query_api, live)
    doc = inline_api.get(f"/api/agents/{live}/documents/chat").json()
    assert [it["message_id"] for it in doc["items"]] == [m["message_id"] for m in messages()]
    assert doc["operation_id"] == done["operation_id"]  # the latest append's
    # The whole conversation re-posted as it was appended is recognised as unchanged.
    again = inline_api.post("/api/memories/batch", json={**body, "agent_id": live}).json()
    assert again["status"] == "unchanged"


def test_retry_conflict_and_bad_input(inline_api: Any, pool: Any, agent_id: str) -> None:
    first = append(inline_api, agent_id, "c1", messages(0, 2))
    again = append(inline_api, agent_id, "c1", messages(0, 2))
    assert again["status"] == "unchanged" and again["messages_existing"] == 2
    assert again["operation_id"] == first["operation_id"]
    mixed = append(inline_api, agent_id, "c1", messages(1, 3))
    assert (mixed["messages_new"], mixed["messages_existing"]) == (1, 1)

    changed = [{**messages(0, 1)[0], "content": "Something else entirely."}, *messages(3, 4)]
    refused = append(inline_api, agent_id, "c1", changed, expect=409)
    assert refused["error"]["code"] == "message_conflict"
    assert refused["error"]["details"]["message_ids"] == ["m00"]
    bad = [
        [],
        [{**messages(4, 5)[0], "role": "narrator"}],
        [messages(4, 5)[0], messages(4, 5)[0]],
        [{**messages(4, 5)[0], "content": "  "}],
        [{k: v for k, v in messages(4, 5)[0].items() if k != "message_id"}],
    ]
    for batch in bad:
        assert append(inline_api, agent_id, "c1", batch, expect=422)["error"]
    limit = inline_api.app.state.settings.max_items_per_batch
    many = [{"message_id": f"n{i}", "role": "user", "content": "hi"} for i in range(limit + 1)]
    assert append(inline_api, agent_id, "c1", many, expect=422)["error"]["code"] == (
        "too_many_items"
    )
    with pool.connection() as conn:
        stored = conn.execute(
            "SELECT m.message_id FROM conversation_messages m JOIN documents d "
            "ON d.id = m.document_pk WHERE d.document_id = 'c1' AND d.agent_id = %s "
            "ORDER BY m.position",
            (agent_id,),
        ).fetchall()
    assert [r["message_id"] for r in stored] == ["m00", "m01", "m02"]  # nothing half-written


def test_batch_route_append_mode(inline_api: Any, agent_id: str) -> None:
    items = [{k: v for k, v in m.items() if k != "message_id"} for m in messages(0, 3)]
    body = {"agent_id": agent_id, "document_id": "b", "items": items[:2], "update_mode": "append"}
    first = inline_api.post("/api/memories/batch", json=body).json()
    assert first["status"] == "created" and first["messages_new"] == 2
    completed(inline_api, first)
    # A client re-sending its whole window: only the message it has not sent is new.
    second = inline_api.post("/api/memories/batch", json={**body, "items": items}).json()
    assert (second["status"], second["messages_new"], second["messages_existing"]) == (
        "appended", 1, 2,
    )  # fmt: skip
    completed(inline_api, second)
    doc = inline_api.get(f"/api/agents/{agent_id}/documents/b").json()
    assert [it["content"] for it in doc["items"]] == [it["content"] for it in items]
    missing = inline_api.post("/api/memories/batch", json={**body, "document_id": None}).json()
    assert missing["error"]["code"] == "validation_error"


def test_late_message_is_placed_by_date_and_its_neighbours_reindexed(
    inline_api: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    chat = messages(0, 6)
    completed(inline_api, append(inline_api, agent_id, "late", [chat[0], chat[1], chat[2]]))
    completed(inline_api, append(inline_api, agent_id, "late", [chat[4], chat[5]]))
    late = append(inline_api, agent_id, "late", [chat[3]])  # "Nice." arrives last
    completed(inline_api, late)
    state = snapshot(pool, agent_id)
    assert state["order"] == [m["message_id"] for m in chat]
    covered = [m for _, covers in state["chunks"] for m in covers]
    assert sorted(covered) == sorted(m["message_id"] for m in chat)  # each indexed once
    # Its neighbours were re-chunked with it: the index is that of the whole conversation.
    reference = f"{agent_id}-ref"
    body = {"agent_id": reference, "document_id": "late", "items": chat}
    completed(inline_api, inline_api.post("/api/memories/batch", json=body).json())
    assert state["chunks"] == snapshot(pool, reference)["chunks"]
    doc = inline_api.get(f"/api/agents/{agent_id}/documents/late").json()
    assert [it["message_id"] for it in doc["items"]] == [m["message_id"] for m in chat]
    assert len(state["units"]) == len({(u[0], u[1]) for u in state["units"]})


def test_concurrent_appends_to_one_conversation_lose_nothing(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """Appends from many threads (as from several API replicas) on separate connections."""
    from memora.basics.models import MemoryItem
    from memora.basics.tenancy import Scope
    from memora.pipeline.context import AppContext
    from memora.usecases import ingest

    class Collect:
        def __init__(self) -> None:
            self.ops: list[Any] = []

        def enqueue(
            self,
            stage: Any,
            operation_id: Any,
            *,
            backfill: bool = False,
            delay: float = 0.0,
            held: bool = False,
        ) -> None:
            self.ops.append(operation_id)

    backend = Collect()
    app = AppContext(inline_api.app.state.settings, pool, backend)
    batches = [
        [MemoryItem(message_id=f"t{t}-{k}", role="user", content=f"thread {t} says {k}")
         for k in range(3)]
        for t in range(8)
    ]  # fmt: skip
    errors: list[BaseException] = []

    def run(batch: list[MemoryItem]) -> None:
        try:
            for _ in range(2):  # each thread also retries its append
                with pool.connection() as conn:
                    ingest.append(app, conn, Scope(), agent_id, "busy", batch)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT m.message_id, m.position, m.ordinal FROM conversation_messages m "
            "JOIN documents d ON d.id = m.document_pk "
            "WHERE d.agent_id = %s AND d.document_id = 'busy'",
            (agent_id,),
        ).fetchall()
        doc = conn.execute(
            "SELECT item_count FROM documents WHERE agent_id = %s AND document_id = 'busy'",
            (agent_id,),
        ).fetchone()
    assert len(rows) == 24 and doc is not None and doc["item_count"] == 24
    assert len({r["message_id"] for r in rows}) == 24
    assert sorted(r["position"] for r in rows) == list(range(24))
    assert sorted(r["ordinal"] for r in rows) == list(range(24))
    # nothing ran meanwhile: the first append's operation took the others' messages too
    assert len(backend.ops) == 1
    for op in backend.ops:  # the collected operations run to completion, in any order
        inline_api.app.state.backend.enqueue(_first_stage(), op)
    with pool.connection() as conn:
        units = conn.execute(
            "SELECT count(*) AS n FROM memory_units WHERE agent_id = %s", (agent_id,)
        ).fetchone()
    assert units is not None and units["n"] == 24


def _first_stage() -> Any:
    from memora.basics.stages import INGEST_STAGES

    return INGEST_STAGES[0]


def test_whole_post_takes_over_from_an_append_in_flight(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """An append not yet processed when the whole conversation is re-posted is superseded:
    the re-post claims its messages, and nothing is extracted twice."""
    from memora.basics.models import MemoryItem
    from memora.basics.tenancy import Scope
    from memora.pipeline.context import AppContext
    from memora.usecases import ingest

    class Hold:  # takes the operation and runs nothing
        def enqueue(
            self,
            stage: Any,
            operation_id: Any,
            *,
            backfill: bool = False,
            delay: float = 0.0,
            held: bool = False,
        ) -> None:
            pass

    completed(inline_api, append(inline_api, agent_id, "r", messages(0, 3)))
    with pool.connection() as conn:
        held = ingest.append(
            AppContext(inline_api.app.state.settings, pool, Hold()), conn, Scope(), agent_id,
            "r", [MemoryItem(**m) for m in messages(3, 6)],
        )  # fmt: skip
    # (the same messages would be an unchanged post: a title makes it a replace)
    body = {"agent_id": agent_id, "document_id": "r", "items": messages(0, 6), "title": "T"}
    replaced = inline_api.post("/api/memories/batch", json=body).json()
    assert replaced["status"] == "replaced"
    completed(inline_api, replaced)
    inline_api.app.state.backend.enqueue(_first_stage(), held.operation_id)
    op = inline_api.get(f"/api/operations/{held.operation_id}").json()
    assert op["status"] == "superseded"

    reference = f"{agent_id}-ref"
    completed(inline_api, inline_api.post(
        "/api/memories/batch", json={**body, "agent_id": reference}
    ).json())  # fmt: skip
    assert snapshot(pool, agent_id)["units"] == snapshot(pool, reference)["units"]


# ------------------------------------------------------------------------------ LLM prompts
def test_llm_prompt_per_append_stays_flat_as_the_conversation_grows(
    llm_inline_api: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    fake_llm.always(
        lambda request: Reply({"facts": [{"item": 0, "text": "A fact.", "fact_type": "world"}]}),
        when=MARKER,
    )
    sizes = []
    for i in range(40):
        message = {"message_id": f"x{i}", "role": "user", "speaker": "Maya",
                   "content": f"Message number {i} of a long chat about the reef survey.",
                   "event_date": f"2024-03-01T11:{i:02d}:00Z"}  # fmt: skip
        completed(llm_inline_api, append(llm_inline_api, agent_id, "long", [message]))
        sizes.append(len(fake_llm.requests_matching(MARKER)[-1].prompt))
    assert max(sizes[15:]) <= sizes[12] * 1.05  # flat once the context window is full
    last = fake_llm.requests_matching(MARKER)[-1].content_of("user")
    assert "Message number 38" in last and "Message number 29" in last
    assert "Message number 28 " not in last  # ten earlier messages, no more


# ------------------------------------------------------------------------------ real workers
def test_a_stream_of_appends_through_real_workers(
    celery_api: Any, pool: Any, agent_id: str
) -> None:
    """Appends sent without waiting, their operations running side by side in the stage
    workers: every message extracted once and indexed once, in order."""
    from tests.conftest import wait_until

    chat = messages()
    ops = [append(celery_api, agent_id, "stream", chat[i : i + 2])["operation_id"]
           for i in range(0, len(chat), 2)]  # fmt: skip
    ops.append(append(celery_api, agent_id, "stream", chat[:4])["operation_id"])  # a retry

    def finished() -> bool:
        states = [celery_api.get(f"/api/operations/{op}").json()["status"] for op in ops]
        assert "failed" not in states
        return all(s == "completed" for s in states)

    wait_until(finished, 120)
    state = snapshot(pool, agent_id)
    assert state["order"] == [m["message_id"] for m in chat]
    covered = sorted(m for _, covers in state["chunks"] for m in covers)
    assert covered == sorted(m["message_id"] for m in chat)
    keys = [(u[0], u[1]) for u in state["units"]]
    assert len(keys) == len(set(keys)) and all(u[5] for u in state["units"])
    with pool.connection() as conn:
        sourced = conn.execute(
            "SELECT count(DISTINCT m.message_id) AS n FROM unit_sources s "
            "JOIN conversation_messages m ON m.id = s.message_pk WHERE m.agent_id = %s",
            (agent_id,),
        ).fetchone()
    assert sourced is not None and sourced["n"] == len({u[0] for u in state["units"]})
