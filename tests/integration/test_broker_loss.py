"""Redis killed mid-backfill and restarted empty: every accepted item is still processed once.

A stack of its own (database, Redis, one worker per stage, beat with a fast reconciler), so
that killing its broker disturbs nothing else. Documents are posted on the backfill queues;
Redis is SIGKILLed with its data wiped (every queued message lost), more documents are posted
while it is down (the API still answers 200: the content is durable), Redis comes back empty,
and the reconciler re-enqueues whatever stopped moving.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings
from tests.conftest import WORKER_ENV, own_database, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def own_stack(pg_url: str, data_dir: Path) -> Iterator[Any]:
    from services.cli.stack import Stack

    with own_database(pg_url, "memora_broker_loss") as url:
        settings = Settings(database_url=url, broker_url=None, data_dir=data_dir / "broker-loss")
        stack = Stack(
            settings,
            with_api=False,
            with_query=False,
            log_dir=settings.data_dir / "logs",
            extra_env=WORKER_ENV,
        )
        stack.start()
        try:
            yield stack
        finally:
            stack.stop()


def _items(doc: int) -> list[dict[str, Any]]:
    return [
        {"content": f"Maya: archive note {doc}-{i} about the lidar calibration in Pittsburgh."}
        for i in range(3)
    ]


def test_broker_lost_mid_backfill_loses_nothing(own_stack: Any) -> None:
    from memora.db.pool import make_pool
    from services.api.app import create_app

    redis = own_stack.redis
    pool = make_pool(str(own_stack.settings.database_url), max_size=4, name="broker-loss")
    headers = {"X-Memora-Priority": "backfill"}
    try:
        with TestClient(create_app(own_stack.settings, pool=pool)) as api:

            def post(doc: int) -> str:
                body = {"agent_id": "archive", "document_id": f"doc-{doc}", "items": _items(doc)}
                response = api.post("/api/memories/batch", json=body, headers=headers)
                assert response.status_code == 200, response.text
                return str(response.json()["operation_id"])

            ops = [post(d) for d in range(12)]
            # kill the broker hard and lose everything it held
            redis.process.send_signal(signal.SIGKILL)
            redis.process.wait()
            shutil.rmtree(redis.data_dir, ignore_errors=True)
            ops += [post(d) for d in range(12, 18)]  # accepted while Redis is down
            redis.start()  # same port, empty

            def settled() -> bool:
                with pool.connection() as conn:
                    states = conn.execute(
                        "SELECT status FROM operations WHERE id = ANY(%s::uuid[])", (ops,)
                    ).fetchall()
                return all(r["status"] == "completed" for r in states)

            wait_until(settled, timeout=240, interval=1.0)
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS units,"
                " count(DISTINCT (document_pk, item_index, seq)) AS distinct_units,"
                " count(*) FILTER (WHERE embedding IS NULL) AS unembedded"
                " FROM memory_units WHERE agent_id = 'archive'"
            ).fetchone()
        assert row == {"units": 18 * 3, "distinct_units": 18 * 3, "unembedded": 0}
    finally:
        pool.close()
