"""Privacy and what extraction keeps (issue 31, items 2 and 7), through the write API with
stages inline on the suite's PostgreSQL, the LLM extractor against the fake LLM server:
temporary chats leave no memory and nothing in the conversation index; sensitive facts are kept
only when the user asked; categories and confidence are stored; the importance floor drops."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.extraction.llm import MARKER
from tests.fakes import FakeOpenAI, Reply

pytestmark = pytest.mark.integration

WHEN = "2024-05-01T10:00:00Z"


@contextmanager
def write_api(settings: Settings, pool: Any, **update: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from memora.pipeline.runner import Pipeline
    from services.api.app import create_app

    configured = settings.model_copy(update=update)
    app = create_app(configured, pool=pool, backend=InlineBackend(Pipeline(configured, pool)))
    with TestClient(app) as client:
        yield client


@pytest.fixture()
def llm_api(llm_settings: Settings, pool: Any) -> Iterator[Any]:
    with write_api(llm_settings, pool, extractor="llm") as client:
        yield client


def fact(item: int, text: str, **extra: Any) -> dict[str, Any]:
    return {"item": item, "text": text, "fact_type": "world", **extra}


def completed(api: Any, response: Any) -> dict[str, Any]:
    assert response.status_code in (200, 202), response.text
    op = api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed", op
    return dict(op)


def units(pool: Any, agent_id: str) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT text, category, confidence_score, importance FROM memory_units "
            "WHERE agent_id = %s ORDER BY item_index, seq",
            (agent_id,),
        ).fetchall()


def indexed(pool: Any, agent_id: str) -> tuple[int, list[str]]:
    """The agent's stored messages and the texts of its conversation chunks."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM conversation_messages WHERE agent_id = %s", (agent_id,)
        ).fetchone()
        chunks = conn.execute(
            "SELECT text FROM conversation_chunks WHERE agent_id = %s", (agent_id,)
        ).fetchall()
    return row["n"], [c["text"] for c in chunks]


# ---------------------------------------------------------------------------- temporary
def test_a_temporary_chat_leaves_no_memory_and_nothing_in_the_index(
    llm_api: Any, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    secret = "Dana: My passport number is X1234567, keep it between us."
    body = {
        "agent_id": agent_id,
        "document_id": "chat-1",
        "temporary": True,
        "items": [{"content": secret, "event_date": WHEN, "role": "user"}],
    }
    completed(llm_api, llm_api.post("/api/memories/batch", json=body))
    path = f"/api/agents/{agent_id}/conversations/chat-1/messages"
    later = {"message_id": "m2", "role": "user", "content": "Dana: The code word is heron."}
    completed(llm_api, llm_api.post(path, json={"temporary": True, "messages": [later]}))
    assert fake_llm.requests_matching(MARKER) == []  # nothing reached the LLM
    assert units(pool, agent_id) == []
    assert indexed(pool, agent_id) == (2, [])  # kept for the conversation, not indexed

    # the same conversation, no longer temporary: only the new message is remembered and
    # indexed, and its chunk carries nothing of the temporary messages as context
    fake_llm.script(Reply({"facts": [fact(0, "Dana moved to Lisbon in April 2024.")]}), when=MARKER)
    normal = {"message_id": "m3", "role": "user", "content": "Dana: I moved to Lisbon in April."}
    completed(llm_api, llm_api.post(path, json={"messages": [normal]}))
    assert [u["text"] for u in units(pool, agent_id)] == ["Dana moved to Lisbon in April 2024."]
    (prompt,) = fake_llm.requests_matching(MARKER)
    assert "heron" not in prompt.prompt and "X1234567" not in prompt.prompt
    messages, chunks = indexed(pool, agent_id)
    assert messages == 3 and chunks and all("Lisbon" in c for c in chunks)
    assert not any("heron" in c or "X1234567" in c for c in chunks)


def test_a_temporary_message_can_still_be_searchable(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    item = {"content": "Eli: Our wifi password changed to bluefinch.", "searchable": True}
    body = {"agent_id": agent_id, "document_id": "d", "temporary": True, "items": [item]}
    completed(inline_api, inline_api.post("/api/memories/batch", json=body))
    assert units(pool, agent_id) == []
    messages, chunks = indexed(pool, agent_id)
    assert messages == 1 and len(chunks) == 1 and "bluefinch" in chunks[0]


# ---------------------------------------------------------------- sensitive, categories
def test_sensitive_facts_are_kept_only_when_asked_and_categories_are_stored(
    llm_api: Any, settings: Settings, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    items = [
        {"content": "Ravi: I was diagnosed with asthma last week.", "event_date": WHEN},
        {"content": "Ravi: I prefer window seats on long flights.", "event_date": WHEN},
        {"content": "Ravi: Please remember that I take insulin daily.", "event_date": WHEN},
        {"content": "Ravi: It rained a bit this morning.", "event_date": WHEN},
    ]
    answer = {
        "facts": [
            fact(0, "Ravi was diagnosed with asthma in April 2024.", importance=10,
                 category="fact", confidence=0.95, sensitive="health"),
            fact(1, "Ravi prefers window seats on long flights.", importance=6,
                 category="Preference", confidence=0.9, sensitive=None),
            fact(2, "Ravi takes insulin daily.", importance=9, category="fact",
                 confidence=0.8, sensitive="health"),
            fact(3, "It rained on the morning of May 1, 2024.", importance=2,
                 category="weather", confidence=1.7),
        ]
    }  # fmt: skip
    fake_llm.script(Reply(answer), when=MARKER)
    body = {"agent_id": agent_id, "document_id": "ravi", "items": items}
    op = completed(llm_api, llm_api.post("/api/memories/batch", json=body))
    assert op["counts"]["facts_dropped_sensitive"] == 1
    assert op["counts"]["facts_dropped_below_importance"] == 1  # the default floor, 3
    assert [(u["text"], u["category"], u["confidence_score"]) for u in units(pool, agent_id)] == [
        ("Ravi prefers window seats on long flights.", "preference", pytest.approx(0.9)),
        ("Ravi takes insulin daily.", "fact", pytest.approx(0.8)),  # asked: kept
    ]
    system = fake_llm.requests_matching(MARKER)[0].content_of("system")
    assert 'reveals "health" information' in system

    # the remember route is explicit by definition: the same sensitive fact is kept
    from fastapi.testclient import TestClient

    from services.api.query_app import create_app as create_query_app

    with TestClient(create_query_app(settings, pool=pool)) as query:
        r = query.post(
            f"/api/agents/{agent_id}/remember",
            json={"content": "Ravi was diagnosed with asthma in April 2024.", "category": "fact"},
        )
    assert r.status_code == 200, r.text
    assert r.json()["decision"] == "ADD"
    assert "Ravi was diagnosed with asthma in April 2024." in {
        u["text"] for u in units(pool, agent_id)
    }


def test_no_sensitive_categories_keeps_tagged_facts(
    llm_settings: Settings, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    answer = {"facts": [fact(0, "Mia broke her wrist in 2023.", sensitive="health")]}
    fake_llm.script(Reply(answer), when=MARKER)
    items = [{"content": "Mia: I broke my wrist last year.", "event_date": WHEN}]
    with write_api(llm_settings, pool, extractor="llm", sensitive_categories=[]) as api:
        completed(api, api.post("/api/memories/batch", json={"agent_id": agent_id, "items": items}))
    assert [u["text"] for u in units(pool, agent_id)] == ["Mia broke her wrist in 2023."]
    assert "information, that category" not in fake_llm.requests_matching(MARKER)[0].content_of(
        "system"
    )


# ------------------------------------------------------------------- importance floor
def test_importance_minimum_drops_low_facts(
    llm_settings: Settings, fake_llm: FakeOpenAI, pool: Any, agent_id: str
) -> None:
    answer = {
        "facts": [
            fact(0, "Noor adopted a cat named Pixel.", importance=7),
            fact(0, "Noor had toast for breakfast.", importance=5),
        ]
    }
    fake_llm.script(Reply(answer), when=MARKER)
    items = [{"content": "Noor: I adopted a cat, Pixel! Had toast.", "event_date": WHEN}]
    with write_api(llm_settings, pool, extractor="llm", importance_minimum=6) as api:
        body = {"agent_id": agent_id, "items": items}
        op = completed(api, api.post("/api/memories/batch", json=body))
    assert op["counts"]["facts_dropped_below_importance"] == 1
    assert [u["text"] for u in units(pool, agent_id)] == ["Noor adopted a cat named Pixel."]


def test_local_extractor_guesses_categories_and_has_no_floor_unless_set(
    settings: Settings, pool: Any, agent_id: str
) -> None:
    items = [
        {"content": "Leo: I really love spicy ramen.", "event_date": WHEN},
        {"content": "Leo: We decided to move the launch to June.", "event_date": WHEN},
        {"content": "Leo: The fence is green.", "event_date": WHEN},
    ]
    with write_api(settings, pool, extractor="local") as api:
        body = {"agent_id": agent_id, "document_id": "leo", "items": items}
        completed(api, api.post("/api/memories/batch", json=body))
    stored = units(pool, agent_id)
    assert [(u["category"], u["confidence_score"]) for u in stored] == [
        ("preference", 1.0),
        ("decision", 1.0),
        ("fact", 1.0),
    ]
    floor = max(u["importance"] for u in stored)
    with write_api(settings, pool, extractor="local", importance_minimum=floor) as api:
        body = {"agent_id": agent_id, "document_id": "leo2", "items": items}
        op = completed(api, api.post("/api/memories/batch", json=body))
    assert op["counts"]["units"] == sum(u["importance"] >= floor for u in stored) < len(items)
