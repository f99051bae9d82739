"""Embedding providers (seed 001) through the real stack: the write API, the query service and
the pipeline embed through the fake server's OpenAI /v1/embeddings or Ollama /api/embed, and a
model that is missing or of the wrong dimension stops the query service and a Celery worker at
start with a message naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from memora.basics.config import Settings
from memora.pipeline.runner import Pipeline
from tests.conftest import own_database_pool
from tests.fakes import FakeOpenAI
from tests.fakes.openai_server import fake_vector
from tests.integration.stack_support import Client, topology

pytestmark = pytest.mark.integration

ITEMS = [
    {"content": "Maria planted tomatoes and basil in her garden.", "event_date": "2024-05-01"},
    {"content": "The quarterly budget review moved to Thursday.", "event_date": "2024-05-02"},
    {"content": "Tom adopted a grey kitten from the shelter.", "event_date": "2024-05-03"},
]


def remote(settings: Settings, fake: FakeOpenAI, provider: str, model: str) -> Settings:
    url = fake.base_url if provider == "openai" else fake.root_url
    return settings.model_copy(
        update={
            "embedding_provider": provider,
            "embedding_base_url": url,
            "embedding_model": model,
            "embedding_api_key": SecretStr("sk-embed"),
            "embedding_max_retries": 1,
        }
    )


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_ingest_and_search_with_the_servers_vectors(
    settings: Settings, pg_url: str, fake_llm: FakeOpenAI, agent_id: str, provider: str
) -> None:
    """On a database of its own, which records the server's model as its live embedding
    generation (the suite's records the bundled one, which every process follows)."""
    with own_database_pool(pg_url, "providers") as (url, pool):
        s = remote(settings, fake_llm, provider, "fake-embed").model_copy(
            update={"database_url": url}
        )
        _ingest_and_search(s, pool, fake_llm, agent_id, provider)


def _ingest_and_search(
    s: Settings, pool: Any, fake_llm: FakeOpenAI, agent_id: str, provider: str
) -> None:
    with topology(s, pool, Pipeline(s, pool)) as t, Client(t) as client:
        response = client.post(
            "/api/memories/batch", json={"agent_id": agent_id, "document_id": "d", "items": ITEMS}
        )
        assert response.status_code == 200, response.text
        op = client.get(f"/api/operations/{response.json()['operation_id']}").json()
        assert op["status"] == "completed", op
        found = client.post(
            "/api/search", json={"agent_id": agent_id, "query": "what grows in Maria's garden"}
        )
        assert found.status_code == 200, found.text
        assert "tomatoes" in found.json()["results"][0]["text"]
    paths = {r.path for r in fake_llm.embedding_requests()}
    assert paths == ({"/v1/embeddings"} if provider == "openai" else {"/api/embed"})
    texts = [str(x) for r in fake_llm.embedding_requests() for x in r.body["input"]]
    assert "what grows in Maria's garden" in texts  # the query, embedded by the server
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT text, embedding FROM memory_units WHERE agent_id = %s", (agent_id,)
        ).fetchall()
    assert rows
    for row in rows:  # every stored vector is the server's for that text
        expected = np.asarray(fake_vector(row["text"], 384), dtype=np.float32)
        np.testing.assert_allclose(row["embedding"].to_numpy(), expected, atol=1e-5)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("no-such-model", "'no-such-model' not found at openai endpoint"),
        ("fake-embed-768", "gives 768-d vectors but the database's are 384-d"),
    ],
)
def test_the_query_service_refuses_to_start(
    settings: Settings, pg_url: str, fake_llm: FakeOpenAI, model: str, message: str
) -> None:
    """On a new database, whose live embedding generation the first process records."""
    from services.api.query_app import create_app

    with own_database_pool(pg_url, "providers") as (url, pool):
        s = remote(settings, fake_llm, "openai", model).model_copy(update={"database_url": url})
        app = create_app(s, pool=pool)
        with pytest.raises(RuntimeError, match=message) as failed, TestClient(app):
            pass
    assert "MEMORA_EMBEDDING_" in str(failed.value)


def test_the_query_service_checks_the_databases_own_dimension(
    settings: Settings, pg_url: str, fake_llm: FakeOpenAI
) -> None:
    """MEMORA_EMBEDDING_DIM saying 768 does not hide a 384-d schema."""
    from services.api.query_app import create_app

    with own_database_pool(pg_url, "providers") as (url, pool):
        s = remote(settings, fake_llm, "openai", "fake-embed-768")
        update = {"embedding_dim": 768, "database_url": url}
        app = create_app(s.model_copy(update=update), pool=pool)
        match = "768-d vectors but the database's are 384-d"
        with pytest.raises(RuntimeError, match=match), TestClient(app):
            pass


def test_a_worker_refuses_to_start(
    settings: Settings, redis_url: str, fake_llm: FakeOpenAI
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "MEMORA_DATABASE_URL": settings.require_database_url(),
        "MEMORA_BROKER_URL": redis_url,
        "MEMORA_EMBEDDING_PROVIDER": "ollama",
        "MEMORA_EMBEDDING_BASE_URL": fake_llm.root_url,
        "MEMORA_EMBEDDING_MODEL": "nomic-embed-text",
        "MEMORA_WORKER_METRICS_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "services.workers.tasks", "worker", "-Q", "embed",
         "--pool", "solo", "--without-mingle", "--without-gossip"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0
    assert "memora worker cannot start" in done.stderr + done.stdout
    assert "'nomic-embed-text' not found at ollama endpoint" in done.stderr + done.stdout
    assert "ollama pull nomic-embed-text" in done.stderr + done.stdout
