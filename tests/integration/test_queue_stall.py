"""A queue nobody consumes shows: its oldest message's age grows on the write API's /metrics
and in `GET /api/admin/queues` while the stage's worker has cancelled its consumer, and goes
back to 0 once it consumes again (the stall alert watches that age)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from services.api.app import create_app
from services.api.stack_health import active_queues
from services.workers.celery_app import create_celery
from tests.conftest import wait_until
from tests.integration.auth_support import ADMIN, ADMIN_KEY

pytestmark = pytest.mark.integration

AGE = re.compile(r'^memora_queue_oldest_age_seconds\{queue="links"\} (\S+)$', re.M)


@pytest.fixture()
def admin_api(worker_stack: Any, pool: Any) -> Iterator[TestClient]:
    """The write API on the suite's broker and workers, with an admin key (the queues route
    is an admin's)."""
    settings = worker_stack.settings.model_copy(
        update={"auth_required": True, "admin_key": SecretStr(ADMIN_KEY), "auth_failure_limit": ""}
    )
    with TestClient(create_app(settings, pool=pool), headers=ADMIN) as client:
        yield client


def _exported_age(api: Any) -> float:
    found = AGE.search(api.get("/metrics").text)
    return float(found.group(1)) if found else 0.0


def test_a_stalled_queue_shows_its_oldest_message_age(
    admin_api: TestClient, worker_stack: Any, agent_id: str
) -> None:
    celery = create_celery(worker_stack.settings)
    consumed = lambda: {q for found in active_queues(celery).values() for q in found}  # noqa: E731
    wait_until(lambda: "links" in consumed(), timeout=180, interval=1)  # the workers started
    control = celery.control
    assert control.cancel_consumer("links", reply=True, timeout=5)
    assert "links" not in consumed()
    try:
        said = admin_api.post(
            "/api/memories/batch",
            json={"agent_id": agent_id, "items": [{"content": "Ines repairs clocks in Porto."}]},
        )
        assert said.status_code == 200, said.text
        operation = said.json()["operation_id"]

        def waiting() -> float:
            queues = admin_api.get("/api/admin/queues").json()
            return float(queues["oldest_seconds"]["links"]) if queues["queues"]["links"] else 0.0

        wait_until(lambda: waiting() > 2.0, timeout=60, interval=0.5)
        wait_until(lambda: _exported_age(admin_api) > 2.0, timeout=30, interval=1)
        assert admin_api.get(f"/api/operations/{operation}").json()["stage"] == "links"
    finally:
        assert control.add_consumer("links", reply=True, timeout=5)
    wait_until(
        lambda: admin_api.get(f"/api/operations/{operation}").json()["status"] == "completed",
        timeout=60,
    )
    assert admin_api.get("/api/admin/queues").json()["oldest_seconds"]["links"] == 0.0
    wait_until(lambda: _exported_age(admin_api) == 0.0, timeout=30, interval=1)
