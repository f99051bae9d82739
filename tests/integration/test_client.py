"""memora_client against the deployed topology: the write API forwarding to the query service,
both under uvicorn on free ports (as in tests/integration/stack_support.py), on the suite's
PostgreSQL, the pipeline inline, and the fake LLM server. Every method reaches its route and
reads its answer; error answers raise with their code; a query service that is down is a 503
`query_service_unavailable` with Retry-After."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest

from memora.basics.config import Settings
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from memora_client import AsyncMemoraClient, MemoraClient, errors
from memora_client import models as m
from tests.fakes import FakeOpenAI, Reply
from tests.integration.stack_support import serve

pytestmark = pytest.mark.integration

FACTS = [
    {"content": "Maya is planning a trip to Kyoto in November.", "speaker": "Maya",
     "event_date": "2024-05-01T09:00:00Z", "metadata": {"topic": "travel"}},
    {"content": "Maya's sister Hanna is allergic to peanuts.", "speaker": "Maya",
     "event_date": "2024-05-01T09:01:00Z"},
]  # fmt: skip
MESSAGES = [
    {"message_id": "m1", "role": "user", "event_date": "2024-05-02T09:00:00Z",
     "content": "Could you find a ryokan in Gion for our Kyoto trip in November?"},
    {"message_id": "m2", "role": "assistant", "event_date": "2024-05-02T09:01:00Z",
     "content": "Gion has several quiet ryokan; I would book one near Yasaka Shrine."},
]  # fmt: skip


@pytest.fixture()
def client(client_url: str) -> Iterator[MemoraClient]:
    with MemoraClient(client_url, timeout=60) as c:
        yield c


def test_store_wait_search_and_documents(client: MemoraClient, agent_id: str) -> None:
    accepted = client.store_batch(agent_id, FACTS, document_id="notes/may 1", title="Notes")
    assert accepted.status == "created" and accepted.items_count == 2
    operation = client.wait_for(accepted.operation_id, timeout=60)
    assert operation.status == "completed" and operation.document_id == "notes/may 1"
    again = client.store_batch(agent_id, FACTS, document_id="notes/may 1", title="Notes")
    assert again.status == "unchanged"

    found = client.search(agent_id, "Where is Maya travelling?", top_k=5)
    kyoto = [r for r in found.results if "Kyoto" in r.text]
    assert kyoto, found
    hit = kyoto[0]
    assert hit.weight > 0 and hit.fact_type in ("world", "agent", "opinion") and hit.id
    only_world = client.search(agent_id, "Kyoto", fact_type=["world"], filters={"topic": "travel"})
    assert all(r.fact_type == "world" for r in only_world.results)
    memory = client.memory(agent_id, hit.id)
    assert memory.id == hit.id and memory.document_id == "notes/may 1"
    sister = [r for r in client.entity(agent_id, "Maya").relations if r.relation == "sibling_of"]
    assert [(r.other.name, r.status) for r in sister] == [("Hanna", "current")]
    assert "Hanna" in client.memory(agent_id, sister[0].evidence[0]).text

    listed = client.list_documents(agent_id)
    assert [d.document_id for d in listed.documents] == ["notes/may 1"]
    document = client.get_document(agent_id, "notes/may 1")
    assert [i["content"] for i in document.items] == [f["content"] for f in FACTS]
    assert client.operations(agent_id).operations[0].id == accepted.operation_id
    deleted = client.delete_document(agent_id, "notes/may 1")
    assert deleted.success and deleted.deleted
    with pytest.raises(errors.NotFoundError) as missing:
        client.get_document(agent_id, "notes/may 1")
    assert missing.value.code == "not_found" and missing.value.status == 404


def test_the_trash_through_the_client(client: MemoraClient, agent_id: str) -> None:
    accepted = client.store_batch(agent_id, FACTS, document_id="notes/june")
    client.wait_for(accepted.operation_id, timeout=60)
    trashed = client.delete_document(agent_id, "notes/june", soft=True)
    assert trashed.state == "trashed" and trashed.deleted["units_trashed"] > 0
    assert trashed.trashed_at and trashed.purge_after and trashed.purge_after > trashed.trashed_at
    assert client.list_documents(agent_id).documents == []
    [listed] = client.list_documents(agent_id, trashed=True).documents
    assert listed.document_id == "notes/june" and listed.trashed_at == trashed.trashed_at
    assert not [r for r in client.search(agent_id, "Kyoto").results if "Kyoto" in r.text]
    with pytest.raises(errors.ConflictError) as refused:
        client.store_batch(agent_id, FACTS, document_id="notes/june")
    assert refused.value.code == "document_trashed"
    restored = client.restore_document(agent_id, "notes/june")
    assert restored.state == "active"
    assert restored.restored["units_restored"] == trashed.deleted["units_trashed"]
    assert [r for r in client.search(agent_id, "Kyoto").results if "Kyoto" in r.text]
    with pytest.raises(errors.ConflictError) as again:
        client.restore_document(agent_id, "notes/june")
    assert again.value.code == "not_trashed"


def test_append_messages_and_conversation_search(client: MemoraClient, agent_id: str) -> None:
    first = client.append_messages(agent_id, "chat-1", MESSAGES[:1], title="Kyoto trip")
    assert first.status == "created" and first.messages_new == 1
    second = client.append_messages(agent_id, "chat-1", MESSAGES)
    assert (second.messages_new, second.messages_existing) == (1, 1)
    client.wait_for(second.operation_id, timeout=60)
    found = client.conversation_search(agent_id, "ryokan in Gion", limit=5)
    assert found.total_results >= 1
    assert {r.conversation_id for r in found.results} == {"chat-1"}
    assert found.results[0].message_id in ("m1", "m2") and found.results[0].snippet
    users = client.conversation_search(agent_id, "ryokan", roles=["user"])
    assert {r.role for r in users.results} <= {"user"}
    marked = client.conversation_search(agent_id, "ryokan", limit=50, highlight=True)
    assert found.results[0].highlights is None  # only when asked for
    ryokan = [r for r in marked.results if "ryokan" in r.snippet.lower()]
    assert ryokan and all("**" in (r.snippet_highlighted or "") for r in ryokan)
    changed = {**MESSAGES[0], "content": "Something else entirely."}
    with pytest.raises(errors.ConflictError) as conflict:
        client.append_messages(agent_id, "chat-1", [changed])
    assert conflict.value.code == "message_conflict"


def test_a_temporary_chat_is_not_remembered(client: MemoraClient, agent_id: str) -> None:
    kept = client.append_messages(agent_id, "open", MESSAGES)
    client.wait_for(kept.operation_id, timeout=60)
    secret = {"message_id": "t1", "role": "user", "content": "Our boat Sea Lark sails from Brest."}
    done = client.append_messages(agent_id, "incognito", [secret], temporary=True)
    client.wait_for(done.operation_id, timeout=60)
    found = client.conversation_search(agent_id, "boat Sea Lark sails from Brest", min_score=0)
    assert found.total_results >= 1 and {r.conversation_id for r in found.results} == {"open"}
    hits = client.search(agent_id, "boat Sea Lark Brest", top_k=50)
    assert not any("Sea Lark" in r.text for r in hits.results)


def test_channels_reach_both_searches(client: MemoraClient, agent_id: str) -> None:
    teams = client.append_messages(agent_id, "standup", MESSAGES, channel="teams")
    web = {"message_id": "w1", "role": "user", "content": "Please find a ryokan near Gion."}
    other = client.append_messages(agent_id, "support", [web], channel="web")
    for accepted in (teams, other):
        client.wait_for(accepted.operation_id, timeout=60)
    found = client.conversation_search(agent_id, "ryokan Gion", channel="web", min_score=0)
    assert {(r.conversation_id, r.channel) for r in found.results} == {("support", "web")}
    both = client.conversation_search(agent_id, "ryokan Gion", channel=["web", "teams"])
    assert {r.channel for r in both.results} == {"web", "teams"}
    memories = client.search(agent_id, "ryokan Gion", top_k=50, channel="teams")
    assert memories.results and all(r.metadata["channel"] == "teams" for r in memories.results)
    stored = client.store_batch(agent_id, ["Maya booked the ryokan."], "note", channel="console")
    client.wait_for(stored.operation_id, timeout=60)
    notes = client.search(agent_id, "booked the ryokan", channel="console")
    assert [r.metadata["channel"] for r in notes.results] == ["console"]


def test_remember_recall_link_forget_restore(client: MemoraClient, agent_id: str) -> None:
    kept = client.remember(agent_id, "Maya prefers window seats on trains.", importance=7)
    assert kept.decision == "ADD"
    other = client.remember(agent_id, "Maya collects vintage postcards.", category="hobby")
    assert client.remember(agent_id, "Maya prefers window seats on trains.").decision == "SKIP"
    linked = client.link(agent_id, kept.memory_id, other.memory_id, "mentioned_with", weight=0.5)
    assert (linked.relationship, linked.weight) == ("mentioned_with", 0.5)

    recalled = client.recall(agent_id, "window seats", limit=5)
    assert recalled.agent_id == agent_id
    assert recalled.memories[0].id == kept.memory_id and recalled.memories[0].score > 0

    dry = client.forget(agent_id, kept.memory_id, dry_run=True)
    assert dry.dry_run and len(dry.forgotten) == 1
    gone = client.forget(agent_id, kept.memory_id, reason="asked to")
    assert not gone.dry_run and gone.restorable_for_days > 0
    assert all(r.id != kept.memory_id for r in client.recall(agent_id, "window seats").memories)
    client.restore(agent_id, kept.memory_id)
    assert client.memory(agent_id, kept.memory_id).status == "active"
    edited = client.edit(agent_id, kept.memory_id, "Maya prefers aisle seats on trains.")
    assert edited.superseded_id == kept.memory_id
    assert client.memory(agent_id, edited.memory_id).text == "Maya prefers aisle seats on trains."
    assert client.memory(agent_id, kept.memory_id).status == "superseded"
    with pytest.raises(errors.ConflictError):
        client.edit(agent_id, kept.memory_id, "Maya prefers no seat at all.")
    with pytest.raises(errors.NotFoundError):
        client.forget(agent_id, uuid4())


def test_validity_windows_and_as_of(client: MemoraClient, agent_id: str) -> None:
    old = client.remember(agent_id, "Noor works at the city library.")
    new = client.remember(agent_id, "Noor works at the harbour office.")
    assert new.decision == "SUPERSEDE" and new.superseded_id == old.memory_id
    before = client.memory(agent_id, old.memory_id)
    assert before.valid_until is not None and before.valid_from < before.valid_until
    assert client.memory(agent_id, new.memory_id).valid_from == before.valid_until
    then = before.valid_from
    assert [
        r.text for r in client.search(agent_id, "Where does Noor work?", as_of=then).results
    ] == ["Noor works at the city library."]
    recalled = client.recall(agent_id, "Where does Noor work?", as_of=then).memories
    assert [m.id for m in recalled] == [old.memory_id]
    now = client.search(agent_id, "Where does Noor work?").results
    assert now[0].id == new.memory_id and old.memory_id not in {r.id for r in now}


def test_think_and_profiles(client: MemoraClient, fake_llm: FakeOpenAI, agent_id: str) -> None:
    client.wait_for(client.store_batch(agent_id, FACTS).operation_id, timeout=60)
    profile = client.update_profile(
        agent_id, personality={"openness": 0.9}, background="A travel planner."
    )
    assert profile.personality["openness"] == 0.9 and profile.background == "A travel planner."
    assert client.get_profile(agent_id).background == "A travel planner."
    limited = client.update_profile(agent_id, limits={"max_memories": 500, "max_reflections": None})
    assert limited.limits == {"max_memories": 500, "max_reflections": None}
    assert limited.background == "A travel planner."
    assert agent_id in [a.agent_id for a in client.list_agents().agents]

    opinion = {"statement": "Kyoto is best in autumn", "reasons": ["maple leaves"],
               "confidence": 0.8, "updates": None, "stance": "new"}  # fmt: skip
    fake_llm.script(Reply("Maya is going to Kyoto in November."), when=THINK_MARKER)
    fake_llm.script(Reply({"opinions": [opinion]}), when=OPINION_MARKER)
    thought = client.think(agent_id, "Where is Maya going, and when?")
    assert thought.text == "Maya is going to Kyoto in November."
    assert set(thought.based_on) == {"world", "agent", "opinion"}
    assert any("Kyoto" in f.text for f in thought.based_on["world"])
    assert [o.statement for o in thought.new_opinions] == ["Kyoto is best in autumn"]
    assert thought.opinions_operation_id is not None
    client.wait_for(thought.opinions_operation_id, timeout=60)
    assert [o.statement for o in client.opinions(agent_id).opinions] == ["Kyoto is best in autumn"]
    assert client.delete_agent(agent_id).success


def test_scenes_through_the_client(client: MemoraClient, agent_id: str) -> None:
    listeners = [agent_id, f"{agent_id}-ben"]
    lines: list[Any] = [
        {"turn": 1, "speaker": "Ana", "text": "The lighthouse keeper left for Porto on Monday."},
        m.EpisodeLine(turn=2, speaker="Ben", text="Then the lamp is ours to mind tonight."),
    ]
    batch = client.capture_episodes("harbour-night", listeners, lines)
    assert [(line.turn, line.speaker) for line in batch.lines] == [(1, "Ana"), (2, "Ben")]
    memories = [memory for line in batch.lines for memory in line.memories]
    assert {(x.agent_id, x.status) for x in memories} == {(a, "created") for a in listeners}
    for memory in memories:
        client.wait_for(memory.operation_id, timeout=60)
    found = client.search(listeners[1], "Where did the lighthouse keeper go?", top_k=3)
    assert found.results[0].text.startswith("Ana said: The lighthouse keeper left for Porto")
    again = client.capture_episodes("harbour-night", listeners, lines)
    assert {x.status for line in again.lines for x in line.memories} == {"unchanged"}
    one = client.capture_episode("harbour-night", 3, "Ana", "Mind the fog horn too.", [agent_id])
    assert [(x.agent_id, x.status) for x in one.memories] == [(agent_id, "created")]
    with pytest.raises(errors.UnprocessableError):  # the same turn of the same speaker twice
        client.capture_episodes("harbour-night", listeners, [lines[0], lines[0]])


def test_error_answers_raise_with_the_api_code(client: MemoraClient, agent_id: str) -> None:
    with pytest.raises(errors.NotFoundError) as missing:
        client.operation(uuid4())
    assert missing.value.code == "not_found"
    with pytest.raises(errors.UnprocessableError) as invalid:
        client.search(agent_id, "Kyoto", top_k=0)
    assert invalid.value.code == "validation_error" and invalid.value.status == 422
    assert any("top_k" in e["loc"] for e in invalid.value.details)
    with pytest.raises(errors.UnprocessableError):
        client.store_batch("not a valid agent id!", ["x"])


def test_a_query_service_down_is_503_with_retry_after(settings: Settings, pool: Any) -> None:
    from memora.infra.embedded import free_port
    from services.api import app as write_app

    down = settings.model_copy(update={"query_url": f"http://127.0.0.1:{free_port()}"})
    url, server, thread = serve(write_app.create_app(down, pool=pool))
    try:
        client = MemoraClient(url, max_retries=2, max_backoff=0.2)
        started = time.monotonic()
        with client, pytest.raises(errors.ServiceUnavailableError) as e:
            client.search("someone", "Kyoto")
        # retried twice, each after Retry-After (5 s) capped by max_backoff
        assert 0.3 <= time.monotonic() - started < 4
        assert (e.value.code, e.value.retry_after) == ("query_service_unavailable", 5.0)
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_async_client(client_url: str, agent_id: str) -> None:
    async def run() -> None:
        async with AsyncMemoraClient(client_url, timeout=60) as memora:
            accepted = await memora.store_batch(agent_id, ["Maya is learning Japanese."])
            done = await memora.wait_for(accepted.operation_id, timeout=60)
            assert done.status == "completed"
            found = await memora.search(agent_id, "What is Maya learning?")
            assert any("Japanese" in r.text for r in found.results)
            with pytest.raises(errors.NotFoundError):
                await memora.operation(uuid4())
            with pytest.raises(errors.NotFoundError) as missing:
                await memora.entity(agent_id, "Nobody")
            assert missing.value.code == "entity_not_found"

    asyncio.run(run())


def test_the_api_key_is_sent_and_a_missing_one_is_401(settings: Settings, pool: Any) -> None:
    from pydantic import SecretStr

    from services.api import app as write_app

    key = "client-test-admin-key-0123456789"
    secured = settings.model_copy(
        update={"auth_required": True, "admin_key": SecretStr(key), "auth_failure_limit": ""}
    )
    url, server, thread = serve(write_app.create_app(secured, pool=pool))
    try:
        with MemoraClient(url, api_key=key) as memora:
            assert memora.list_documents("someone").documents == []
        for anonymous in (MemoraClient(url), MemoraClient(url, api_key="not-a-key")):
            with anonymous, pytest.raises(errors.AuthenticationError) as e:
                anonymous.list_documents("someone")
            assert (e.value.status, e.value.code) == (401, "unauthorized")
    finally:
        server.should_exit = True
        thread.join(10)
