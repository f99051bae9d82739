"""Re-embedding by generation (issue 57, item 6): `memora reembed` moves every vector of a
database (memories, conversation chunks) to another model of another dimension (the fake
server's 768-d model, from the bundled 384-d one) while the services run: searches answer
before, during and after the build, an interrupted build resumes where it stopped, extraction
never runs again (same units, same texts, no new operation), the stored vectors are the new
model's, and after the switch the running workers and query service embed with it.

Each test has a database of its own: the switch changes the schema's dimension."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
import pytest
from pydantic import SecretStr

from memora.basics.config import Settings
from memora.basics.errors import Conflict
from memora.db.pool import make_pool
from memora.pipeline import generation
from memora.pipeline.runner import Pipeline
from memora.store import generations
from memora.usecases import reembed
from tests.conftest import WORKER_ENV, own_database, wait_until
from tests.fakes import FakeOpenAI
from tests.fakes.openai_server import fake_vector
from tests.integration.auth_support import ADMIN, ADMIN_KEY
from tests.integration.stack_support import Client, process_stack, topology

pytestmark = pytest.mark.integration

ITEMS = [
    {"content": "Maria planted tomatoes and basil in her garden.", "event_date": "2024-05-01"},
    {"content": "The quarterly budget review moved to Thursday.", "event_date": "2024-05-02"},
    {"content": "Tom adopted a grey kitten from the shelter.", "event_date": "2024-05-03"},
    {"content": "Ines is learning to play the cello on weekends.", "event_date": "2024-05-04"},
    {"content": "The office coffee machine broke again on Monday.", "event_date": "2024-05-05"},
]
MESSAGES = [
    {"message_id": "m1", "role": "user", "event_date": "2024-05-06T09:00:00Z",
     "content": "Could you find a ryokan in Gion for our Kyoto trip in November?"},
    {"message_id": "m2", "role": "assistant", "event_date": "2024-05-06T09:01:00Z",
     "content": "Gion has several quiet ryokan; I would book one near Yasaka Shrine."},
]  # fmt: skip
TARGET_MODEL, TARGET_DIM = "fake-embed-768", 768


class Interrupt(Exception):
    pass


def _target(fake: FakeOpenAI, model: str = TARGET_MODEL) -> reembed.Target:
    return reembed.Target(model, "openai", fake.base_url)


def _snapshot(url: str) -> dict[str, Any]:
    """What extraction made (units and their texts), the operations, the chunks."""
    with psycopg.connect(url) as conn:
        units = conn.execute("SELECT id, text FROM memory_units ORDER BY id").fetchall()
        ops = conn.execute("SELECT id, kind FROM operations ORDER BY id").fetchall()
        chunks = conn.execute("SELECT id, text FROM conversation_chunks ORDER BY id").fetchall()
    return {"units": units, "operations": ops, "chunks": chunks}


def _stored(url: str, table: str) -> list[tuple[str, np.ndarray]]:
    with psycopg.connect(url) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        rows = conn.execute(
            f"SELECT text, embedding FROM {table} WHERE embedding IS NOT NULL ORDER BY id"
        ).fetchall()
    return [(text, np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v)) for text, v in rows]


def _assert_new_model(url: str, dim: int = TARGET_DIM, *, chunk_texts: bool = True) -> None:
    """Every stored vector (units, their half-precision copies, their signatures, chunks) is
    the new model's: of its text (`chunk_texts` False: a chunk indexed since the switch may
    be made of its units' vectors, MEMORA_CONVERSATION_CHUNK_VECTORS=units)."""
    for table in ("memory_units", "conversation_chunks"):
        stored = _stored(url, table)
        assert stored, table
        for text, vector in stored:
            assert vector.shape == (dim,), table
            if table == "conversation_chunks" and not chunk_texts:
                continue
            expected = np.asarray(fake_vector(text, dim), dtype=np.float32)
            assert float(vector @ expected) > 0.999, (table, text)
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE vector_dims(m.embedding) = %s) AS new, count(*) AS n, "
            "max(abs(m.embedding::vector <=> u.embedding)) AS gap FROM memory_vectors m "
            "JOIN memory_units u ON u.id = m.unit_id",
            (dim,),
        ).fetchone()
        assert row is not None and row[0] == row[1] > 0 and row[2] < 1e-3, row
        sigs = conn.execute(
            "SELECT count(*) FILTER (WHERE ue.signature IS DISTINCT FROM "
            f"binary_quantize(u.embedding)::bit({dim})), count(*) "
            "FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id"
        ).fetchone()
        assert sigs is not None and sigs[0] == 0 and sigs[1] > 0, sigs


def _embedded_by_server(fake: FakeOpenAI) -> set[str]:
    """The texts the fake server embedded (the new model's)."""
    return {str(x) for r in fake.embedding_requests() for x in r.body["input"]}


def _search(client: Any, agent: str, query: str) -> list[str]:
    response = client.post("/api/search", json={"agent_id": agent, "query": query})
    assert response.status_code == 200, response.text
    return [r["text"] for r in response.json()["results"]]


def _ingest(client: Any, agent: str, items: list[dict[str, Any]], document: str) -> None:
    response = client.post(
        "/api/memories/batch", json={"agent_id": agent, "document_id": document, "items": items}
    )
    assert response.status_code == 200, response.text
    _finished(client, response.json()["operation_id"])


def _finished(client: Any, op_id: str) -> None:
    def done() -> dict[str, Any] | None:
        op = client.get(f"/api/operations/{op_id}").json()
        return op if op["status"] in ("completed", "failed") else None

    op = wait_until(done, 180)
    assert op["status"] == "completed", op


def _append(client: Any, agent: str) -> None:
    """The conversation, once its operation finished (units extracted, chunks indexed)."""
    response = client.post(
        f"/api/agents/{agent}/conversations/chat/messages", json={"messages": MESSAGES}
    )
    assert response.status_code in (200, 202), response.text
    _finished(client, response.json()["operation_id"])


@pytest.fixture()
def db_url(pg_url: str) -> Iterator[str]:
    with own_database(pg_url, "reembed") as url:
        yield url


def test_a_write_embedded_by_a_retired_generation_is_refused(
    settings: Settings, db_url: str
) -> None:
    """The database side of the guarantee: with the process's generation set on a connection,
    a vector written under another one than the live fails with MG001, and so does the read
    path's check; without the setting (psql) nothing is checked."""
    s = settings.model_copy(update={"database_url": db_url})
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as conn:
        live = generations.live(conn, s)
        conn.execute("INSERT INTO agents (agent_id) VALUES ('a')")
        conn.execute(
            "INSERT INTO embedding_generations (id, state, provider, model, dim) "
            "VALUES (%s, 'retired', 'local', 'old', 384)",
            (live.id + 1,),
        )
        conn.commit()
        insert = (
            "INSERT INTO memory_units (agent_id, text, fact_type, event_date, mentioned_at, "
            "embedding) VALUES ('a', 'x', 'world', now(), now(), %s::vector)"
        )
        vector = "[" + ",".join(["0.05"] * 384) + "]"
        conn.execute(
            "SELECT set_config('memora.embedding_generation', %s, false)", (str(live.id + 1),)
        )
        with pytest.raises(psycopg.Error) as refused:
            conn.execute(insert, (vector,))
        assert generations.changed(refused.value)
        conn.rollback()
        with pytest.raises(generations.GenerationChanged):
            generations.check(conn, live.id + 1)
        conn.rollback()
        conn.execute("SELECT set_config('memora.embedding_generation', %s, false)", (str(live.id),))
        conn.execute(insert, (vector,))
        generations.check(conn, live.id)
        conn.execute("SELECT set_config('memora.embedding_generation', '', false)")
        conn.execute(insert, (vector,))
        conn.commit()


@pytest.mark.parametrize(("model", "dim"), [(TARGET_MODEL, TARGET_DIM), ("fake-embed", 384)])
def test_reembed_inline_resumes_and_switches(
    settings: Settings, db_url: str, fake_llm: FakeOpenAI, model: str, dim: int
) -> None:
    """Through the write API and the query service served in process (stages inline), to a
    model of another dimension and to one of the same (where only the generation check tells
    a stale query from a live one)."""
    s = settings.model_copy(update={"database_url": db_url, "admin_key": SecretStr(ADMIN_KEY)})
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    pool = make_pool(db_url, min_size=1, max_size=6, name="reembed")
    try:
        with topology(s, pool, Pipeline(s, pool)) as t, Client(t) as client:
            _ingest(client, agent, ITEMS, "facts")
            _append(client, agent)
            before = _snapshot(db_url)
            assert "Maria planted" in _search(client, agent, "tomatoes in Maria's garden")[0]

            def stop_early(phase: str, done: int, total: int) -> None:
                if phase == "memories" and done >= 2:
                    raise Interrupt

            with pytest.raises(Interrupt):
                reembed.run(s, _target(fake_llm, model), batch_size=2, progress=stop_early)
            state = reembed.status(s)
            assert state["building"]["model"] == model
            assert 0 < state["progress"]["units_done"] < state["progress"]["units"]
            served = client.get("/api/admin/embedding-generations", headers=ADMIN)  # served
            assert served.status_code == 200, served.text
            assert served.json() == json.loads(json.dumps(state))
            assert "Maria planted" in _search(client, agent, "tomatoes in Maria's garden")[0]

            result = reembed.run(s, _target(fake_llm, model), batch_size=2)
            assert result["switched"] and result["live"]["dim"] == dim
            # resumed: what the first run embedded was not embedded again
            assert result["embedded"] < len(before["units"]) + len(before["chunks"])
            state = reembed.status(s)
            assert state["building"] is None and not state["retired_columns_left"]
            assert state["live"]["model"] == model
            _assert_new_model(db_url, dim)
            after = _snapshot(db_url)
            assert after == before  # nothing extracted again, no operation started
            assert "Maria planted" in _search(client, agent, "what Maria grows in her garden")[0]
            assert "what Maria grows in her garden" in _embedded_by_server(fake_llm)
            _ingest(client, agent, [{"content": "Oskar repaired the blue bicycle."}], "late")
            _assert_new_model(db_url, dim, chunk_texts=False)
            assert "Oskar" in _search(client, agent, "Oskar blue bicycle")[0]
    finally:
        pool.close()


def test_reembed_under_running_workers_and_query_service(
    settings: Settings, db_url: str, fake_llm: FakeOpenAI, redis_url: str, data_dir: Path
) -> None:
    """`memora serve`'s processes (API, query service, a Celery worker per stage) on the
    database while it is re-embedded: searches keep answering throughout (a thread searches
    without pause), and after the switch the running worker embeds a new memory with the new
    model and the running query service answers with it, both without a restart."""
    s = settings.model_copy(
        update={"database_url": db_url, "broker_url": redis_url, "embedding_api_key": None}
    )
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    env = WORKER_ENV | {"MEMORA_EMBEDDING_API_KEY": "sk-embed"}
    with process_stack(s, "reembed", 14, data_dir / "reembed-logs", env=env) as stack:
        base = f"http://{stack.settings.host}:{stack.settings.port}"
        with httpx.Client(base_url=base, timeout=120) as client:
            _ingest(client, agent, ITEMS, "facts")
            _append(client, agent)
            before = _snapshot(db_url)
            answers: list[str] = []
            stop = threading.Event()

            def keep_searching() -> None:
                with httpx.Client(base_url=base, timeout=120) as searcher:
                    while not stop.is_set():
                        answers.append(_search(searcher, agent, "tomatoes in Maria's garden")[0])

            searching = threading.Thread(target=keep_searching)
            searching.start()
            try:
                result = reembed.run(s, _target(fake_llm), batch_size=2)
                wait_until(lambda: len(answers) > 3, 60)  # some after the switch too
            finally:
                stop.set()
                searching.join(120)
            assert result["switched"]
            assert answers and all("Maria planted" in a for a in answers), answers
            assert _snapshot(db_url) == before
            _assert_new_model(db_url)
            _ingest(client, agent, [{"content": "Oskar repaired the blue bicycle."}], "late")
            _assert_new_model(db_url, chunk_texts=False)
            assert "Oskar" in _search(client, agent, "Oskar blue bicycle")[0]
            # the running query service embeds queries with the new model
            assert "Oskar blue bicycle" in _embedded_by_server(fake_llm)
            found = client.post(
                "/api/conversation_search", json={"agent_id": agent, "query": "ryokan in Gion"}
            )
            assert found.status_code == 200, found.text
            assert "ryokan" in found.json()["results"][0]["snippet"]


def test_a_remember_that_a_switch_overtakes_is_refused_then_embedded_again(
    settings: Settings, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`remember` embeds with the generation its process last read: when another goes
    live before its write (here within the 2 s it keeps what it read), the database refuses the
    vector, the API answers 503 `embedding_model_changed`, and the next request, the process
    having read the live generation again on the refusal, is stored."""
    monkeypatch.setattr(generation, "FOLLOW_SECONDS", 600.0)  # no reading it again meanwhile
    s = settings.model_copy(update={"database_url": db_url})
    pool = make_pool(db_url, min_size=1, max_size=4, name="reembed-remember")
    try:
        with topology(s, pool, Pipeline(s, pool)) as t, Client(t) as api:
            url = "/api/agents/ann/remember"
            first = api.post(url, json={"content": "Ann keeps bees on the roof."})
            assert first.status_code == 200, first.text
            with psycopg.connect(db_url) as conn:  # the same model, as a new generation
                conn.execute("UPDATE embedding_generations SET state = 'retired'")
                conn.execute(
                    "INSERT INTO embedding_generations (id, state, provider, model, dim) "
                    "SELECT 2, 'live', provider, model, dim FROM embedding_generations"
                )
            refused = api.post(url, json={"content": "Ann sells the honey at the market."})
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "embedding_model_changed"
            # the refusal had the process read the live generation again: stored at once
            stored = api.post(url, json={"content": "Ann sells the honey."})
            assert stored.status_code == 200, stored.text
    finally:
        pool.close()


def test_an_abandoned_build_leaves_the_live_vectors_as_they_were(
    settings: Settings, db_url: str, fake_llm: FakeOpenAI
) -> None:
    s = settings.model_copy(update={"database_url": db_url})
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    pool = make_pool(db_url, min_size=1, max_size=4, name="reembed-abandon")
    try:
        with topology(s, pool, Pipeline(s, pool)) as t, Client(t) as client:
            _ingest(client, agent, ITEMS, "facts")
            before = _stored(db_url, "memory_units")

            def stop(phase: str, done: int, total: int) -> None:
                raise Interrupt

            with pytest.raises(Interrupt):
                reembed.run(s, _target(fake_llm), batch_size=2, progress=stop)
            with pytest.raises(Conflict, match="under way"):  # another model meanwhile
                reembed.run(s, _target(fake_llm, "fake-embed"), batch_size=2)
            with psycopg.connect(db_url) as other:  # another reembed running
                other.execute("SELECT pg_advisory_lock(hashtext('memora reembed'))")
                with pytest.raises(Conflict, match="another"):
                    reembed.abandon(s)
            assert reembed.abandon(s)
            state = reembed.status(s)
            assert state["building"] is None and state["live"]["dim"] == 384
            with psycopg.connect(db_url) as conn:
                left = conn.execute(
                    "SELECT count(*) FROM pg_attribute WHERE attname LIKE '%\\_next' "
                    "AND NOT attisdropped AND attrelid = 'memory_units'::regclass"
                ).fetchone()
            assert left is not None and left[0] == 0
            after = _stored(db_url, "memory_units")
            assert [t for t, _ in after] == [t for t, _ in before]
            assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(after, before, strict=True))
            assert "Maria planted" in _search(client, agent, "tomatoes in Maria's garden")[0]
    finally:
        pool.close()


def test_a_search_whose_query_generation_is_retired_is_refused_in_its_hydration(
    settings: Any, pool: Any, inline_api: Any, agent_id: str
) -> None:
    """The check rides on the hydration statement (no statement more a search): a retriever
    of a generation that is not live raises GenerationChanged, the live one's answers."""
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.types import SearchParams

    item = {"content": "Ines repairs violins in her workshop in Porto.", "role": "user"}
    body = {"agent_id": agent_id, "document_id": "violins", "items": [item]}
    assert inline_api.post("/api/memories/batch", json=body).status_code == 200
    with pool.connection() as conn:
        live = generations.live(conn, settings)
    embedder = get_embedder(settings.embedding_model)
    question = SearchParams(agent_id, "Who repairs violins?")
    stale = Retriever(settings, pool, embedder, generation=live.id + 1)
    current = Retriever(settings, pool, embedder, generation=live.id)
    try:
        with pytest.raises(generations.GenerationChanged):
            stale.search(question)
        assert "violins" in current.search(question).hits[0].text
    finally:
        stale.close()
        current.close()
