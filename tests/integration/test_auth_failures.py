"""Failed authentications are limited per client address, counted in the suite's real Redis:
past the limit an address gets 429 with Retry-After, for bad and good keys alike, until its
window frees; the address comes from a trusted proxy's header only when one is configured."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from memora.basics.config import Settings
from tests.integration.auth_support import auth_api, auth_app, make_tenant  # noqa: F401 - fixture

pytestmark = pytest.mark.integration
FAILURES = 3  # per 2 seconds
HEADER = "X-Forwarded-For"


@pytest.fixture(scope="module")
def guarded(settings: Settings, pool: Any, pipeline: Any, redis_url: str) -> Iterator[Any]:
    overrides = {
        "auth_failure_limit": f"{FAILURES}/2 seconds",
        "broker_url": redis_url,
        "trusted_proxy_header": HEADER,
    }
    with auth_app(settings, pool, pipeline, **overrides) as client:
        yield client


def _address() -> str:
    """A client address of its own per test, so that tests do not share a budget."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250}"


def _get(api: Any, address: str, key: str | None) -> Any:
    headers = {HEADER: f"203.0.113.9, {address}"}  # the proxy appends the address it saw
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return api.get("/api/agents", headers=headers)


def test_bad_keys_from_one_address_get_429_then_it_recovers(
    guarded: Any,
    auth_api: Any,  # noqa: F811
    redis_url: str,
) -> None:
    tenant = make_tenant(auth_api)
    address = _address()
    answers = [_get(guarded, address, f"mk_guess{i}").status_code for i in range(FAILURES + 2)]
    assert answers == [401] * FAILURES + [429, 429]
    refused = _get(guarded, address, tenant.key)  # a good key from there waits too
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and "failed authentications" in error["message"]
    retry_after = int(refused.headers["retry-after"])
    assert 1 <= retry_after <= 2 and error["details"]["retry_after"] == retry_after
    # counted in Redis, under the limiter's prefix
    stored = redis.Redis.from_url(redis_url).keys(f"memora:ratelimit*auth-failures*{address}*")
    assert stored
    # other addresses are not affected; no key at all is a failure when keys are required
    other = _address()
    assert _get(guarded, other, tenant.key).status_code == 200
    assert _get(guarded, other, None).status_code == 401
    time.sleep(retry_after + 0.2)
    assert _get(guarded, address, tenant.key).status_code == 200


def test_successes_do_not_count(guarded: Any, auth_api: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api)
    address = _address()
    assert all(_get(guarded, address, tenant.key).status_code == 200 for _ in range(FAILURES * 3))
    assert _get(guarded, address, "mk_bad").status_code == 401


def test_the_proxy_header_is_ignored_unless_configured(
    settings: Settings,
    pool: Any,
    pipeline: Any,
    redis_url: str,
) -> None:
    overrides = {"auth_failure_limit": f"{FAILURES}/2 seconds", "broker_url": redis_url}
    with auth_app(settings, pool, pipeline, **overrides) as api:
        answers = [_get(api, _address(), "mk_bad").status_code for _ in range(FAILURES + 1)]
    assert answers == [401] * FAILURES + [429]  # one budget: the connection's address


def test_without_redis_failures_are_let_through(
    settings: Settings,
    pool: Any,
    pipeline: Any,
) -> None:
    overrides = {"auth_failure_limit": "1/minute", "broker_url": "redis://127.0.0.1:9/0"}
    with auth_app(settings, pool, pipeline, **overrides) as api:
        answers = [api.get("/api/agents", headers={"X-API-Key": "mk_x"}) for _ in range(3)]
    assert [r.status_code for r in answers] == [401, 401, 401]
