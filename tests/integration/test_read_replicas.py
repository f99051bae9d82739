"""The query service on a real streaming replica (an embedded standby made with
pg_basebackup): its read routes read the replica, a read naming an operation sees what the
operation made searchable, and a replica that goes away sends reads to the primary until it is
back."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from memora.db.migrate import upgrade
from memora.db.pool import make_pool
from memora.infra.embedded import EmbeddedPostgres
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from services.api.app import create_app as create_api
from services.api.query_app import create_app as create_query
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


class Cluster:
    def __init__(self, root: Path) -> None:
        self.primary = EmbeddedPostgres(root / "primary", shared_buffers="128MB")
        self.replica = EmbeddedPostgres(root / "replica", shared_buffers="128MB")

    def start_replica(self) -> None:
        self.replica.start_standby(self.primary)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("replicated", numbered=True))
    upgrade(cluster.primary.start(), 384)
    cluster.start_replica()
    yield cluster
    cluster.replica.stop(quiet=True)
    cluster.primary.stop(quiet=True)


@pytest.fixture(scope="module")
def clients(cluster: Cluster, settings: Settings) -> Iterator[tuple[TestClient, TestClient]]:
    """The write API (stages inline) and the query service reading the replica."""
    s = settings.model_copy(
        update={
            "database_url": cluster.primary.url,
            "read_database_url": cluster.replica.url,
            "read_after_timeout_seconds": 1.0,
        }
    )
    pool = make_pool(cluster.primary.url, min_size=1, max_size=16, name="primary")
    backend = InlineBackend(Pipeline(s, pool))
    with (
        TestClient(create_api(s, pool=pool, backend=backend)) as api,
        TestClient(create_query(s, pool=pool, backend=backend)) as query,
    ):
        yield api, query
    pool.close()


def _append(api: TestClient, agent: str, text: str) -> str:
    said = api.post(
        f"/api/agents/{agent}/conversations/chat/messages",
        json={"messages": [{"message_id": uuid.uuid4().hex, "role": "user", "content": text}]},
    )
    assert said.status_code == 202, said.text
    return str(said.json()["operation_id"])


def _search(query: TestClient, agent: str, text: str, **more: Any) -> Any:
    return query.post("/api/search", json={"agent_id": agent, "query": text, **more})


def test_a_read_after_an_operation_sees_it_on_the_replica(
    clients: tuple[TestClient, TestClient],
) -> None:
    api, query = clients
    agent = f"ryw-{uuid.uuid4().hex[:8]}"
    for n in range(5):
        word = f"kelpie{n}{uuid.uuid4().hex[:6]}"
        operation = _append(api, agent, f"My dog {word} loves the beach.")
        found = _search(query, agent, f"What is my dog {word}?", after_operation=operation)
        assert found.status_code == 200, found.text
        assert found.headers["x-memora-read-source"] == "replica"
        assert any(word in hit["text"] for hit in found.json()["results"])
    recalled = query.post(
        f"/api/agents/{agent}/recall", json={"query": "dog", "after_operation": operation}
    )
    assert recalled.status_code == 200 and recalled.json()["memories"], recalled.text
    messages = query.post(
        "/api/conversation_search",
        json={"agent_id": agent, "query": "beach", "after_operation": operation},
    )
    assert messages.status_code == 200 and messages.json()["total_results"], messages.text
    assert messages.headers["x-memora-read-source"] == "replica"
    # the write API's graph reads too
    wait_until(lambda: agent in api.get("/api/graph/agents").text, timeout=10, interval=0.2)
    drawn = api.get("/api/graph", params={"agent_id": agent})
    assert drawn.status_code == 200 and drawn.json()["nodes"], drawn.text
    assert drawn.headers["x-memora-read-source"] == "replica"


def test_an_unknown_operation_is_a_404_and_a_running_one_is_waited_for(
    clients: tuple[TestClient, TestClient], cluster: Cluster
) -> None:
    api, query = clients
    agent = f"ryw-{uuid.uuid4().hex[:8]}"
    missing = _search(query, agent, "anything", after_operation=str(uuid.uuid4()))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "operation_not_found"

    operation = _append(api, agent, "The ferry to Skye leaves at nine.")
    with make_pool(cluster.primary.url, min_size=1, max_size=1, name="t") as pool:
        with pool.connection() as conn:  # as if its last stage had not run yet
            conn.execute("UPDATE operations SET status = 'running' WHERE id = %s", (operation,))
        # still running when the wait (1 s) ends: answered anyway, and said
        pending = _search(query, agent, "ferry", after_operation=operation)
        assert pending.status_code == 200 and pending.headers["x-memora-operation-pending"]

        def finish() -> None:
            time.sleep(0.4)
            with pool.connection() as conn:
                conn.execute(
                    "UPDATE operations SET status = 'completed' WHERE id = %s", (operation,)
                )

        finisher = threading.Thread(target=finish)
        finisher.start()
        started = time.monotonic()
        waited = _search(query, agent, "ferry", after_operation=operation)
        finisher.join()
    assert waited.status_code == 200 and "x-memora-operation-pending" not in waited.headers
    assert 0.3 < time.monotonic() - started < 1.0
    assert any("Skye" in hit["text"] for hit in waited.json()["results"])


def test_reads_go_to_the_primary_while_the_replica_is_down(
    clients: tuple[TestClient, TestClient], cluster: Cluster
) -> None:
    api, query = clients
    agent = f"ryw-{uuid.uuid4().hex[:8]}"
    _append(api, agent, "The lighthouse keeper is called Morag.")
    assert _search(query, agent, "lighthouse").headers["x-memora-read-source"] == "replica"
    cluster.replica.stop()
    try:
        for _ in range(3):  # the first may find the replica gone mid-read: read again
            down = _search(query, agent, "lighthouse keeper")
            assert down.status_code == 200, down.text
            assert down.headers["x-memora-read-source"] == "primary"
            assert any("Morag" in hit["text"] for hit in down.json()["results"])
        exported = query.get("/metrics").text
        assert "memora_read_replica_lag_seconds -1.0" in exported
        assert 'memora_reads_total{reason="replica_down",source="primary"}' in exported
    finally:
        cluster.start_replica()  # on its port again
    wait_until(
        lambda: _search(query, agent, "lighthouse").headers["x-memora-read-source"] == "replica",
        timeout=20,
        interval=0.5,
    )
    assert "memora_read_replica_lag_seconds 0.0" in query.get("/metrics").text
