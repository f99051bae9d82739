"""Per-key rate limits counted in the suite's real Redis: 429 with Retry-After and the JSON
error, recovery once the window passes, one budget per key, and no failure without Redis."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memora.basics.config import Settings
from services.api.ratelimit import Limiter
from tests.integration.auth_support import (  # noqa: F401 - fixture
    ADMIN,
    auth_api,
    auth_app,
    make_tenant,
)

pytestmark = pytest.mark.integration
LIMIT = 3  # per second


@pytest.fixture(scope="module")
def limited_api(settings: Settings, pool: Any, pipeline: Any, redis_url: str) -> Iterator[Any]:
    overrides = {"rate_limit": f"{LIMIT}/second;1000/hour", "broker_url": redis_url}
    with auth_app(settings, pool, pipeline, **overrides) as client:
        yield client


def _burst(api: Any, headers: dict[str, str], n: int) -> list[Any]:
    return [api.get("/api/agents", headers=headers) for _ in range(n)]


def _wait_for_a_fresh_second() -> None:
    """Start a burst early in a second, so that it is not split over two windows."""
    time.sleep(1.05 - (time.time() % 1))


def test_over_the_limit_is_429_then_it_recovers(limited_api: Any, auth_api: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api)  # an app without limits: the admin key has a budget too
    _wait_for_a_fresh_second()
    answers = _burst(limited_api, tenant.headers, LIMIT + 2)
    assert [r.status_code for r in answers] == [200] * LIMIT + [429, 429]
    refused = answers[-1]
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and "3 per 1 second" in error["message"]
    assert refused.headers["content-type"].startswith("application/json")
    retry_after = int(refused.headers["retry-after"])
    assert 1 <= retry_after <= 2 and error["details"]["retry_after"] == retry_after
    time.sleep(retry_after + 0.1)
    assert limited_api.get("/api/agents", headers=tenant.headers).status_code == 200


def test_each_key_has_its_own_budget(limited_api: Any, auth_api: Any) -> None:  # noqa: F811
    first, second = make_tenant(auth_api), make_tenant(auth_api)
    _wait_for_a_fresh_second()
    assert _burst(limited_api, first.headers, LIMIT + 1)[-1].status_code == 429
    assert limited_api.get("/api/agents", headers=second.headers).status_code == 200
    assert limited_api.get("/api/agents", headers=ADMIN).status_code == 200
    # the counters are in Redis under the key's id, never the key itself
    import redis

    client = redis.Redis.from_url(limited_api.app.state.settings.broker_url)
    names = [n.decode() for n in client.scan_iter("memora:ratelimit*")]
    assert any(first.key_id in n for n in names) and not any(first.key in n for n in names)


def test_without_a_key_the_client_address_is_limited(
    settings: Settings, pool: Any, pipeline: Any, redis_url: str
) -> None:
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    limited = settings.model_copy(update={"rate_limit": "2/minute", "broker_url": redis_url})
    app = create_app(limited, pool=pool, backend=InlineBackend(pipeline))
    address = f"10.9.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
    with TestClient(app, client=(address, 50000)) as client:
        codes = [client.get("/api/agents").status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        assert client.get("/health/live").status_code == 200  # health is never limited
    with TestClient(app, client=(address + "1", 50000)) as other:
        assert other.get("/api/agents").status_code == 200


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_redis_lets_requests_through(
    settings: Settings, pool: Any, pipeline: Any
) -> None:
    dead = f"redis://127.0.0.1:{_closed_port()}/0"
    overrides = {"rate_limit": "1/minute", "rate_limit_storage_url": dead}
    with auth_app(settings, pool, pipeline, **overrides) as api:
        started = time.monotonic()
        assert [r.status_code for r in _burst(api, ADMIN, 5)] == [200] * 5
        assert time.monotonic() - started < 5  # no request waited for Redis each time


def test_limiter_counts_in_redis_across_instances(redis_url: str) -> None:
    """Two API replicas share one budget per key."""
    identity = f"key:{uuid.uuid4()}"
    one, two = Limiter("2/minute", redis_url), Limiter("2/minute", redis_url)
    assert one.retry_after(identity) is None and two.retry_after(identity) is None
    wait = one.retry_after(identity)
    assert wait is not None and 1 <= wait <= 60
    assert two.retry_after(identity) is not None
