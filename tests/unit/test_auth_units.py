"""Settings of auth and rate limits, the in-process limiter, and the shape of API keys."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError
from starlette.requests import Request

from memora.basics.config import Settings
from memora.store.tenants import generate_key, hash_key, is_valid_tenant_id, parse_duration
from services.api.auth import client_address
from services.api.ratelimit import Limiter, failure_limiter_from_settings, limiter_from_settings


def test_auth_settings_are_validated() -> None:
    assert Settings(admin_key="").admin_key is None  # an empty variable means unset
    assert Settings(admin_key="x" * 16).admin_key is not None
    with pytest.raises(ValidationError, match="at least 16"):
        Settings(admin_key="short")
    with pytest.raises(ValidationError, match="rate limit"):
        Settings(rate_limit="a lot per day")
    assert Settings(rate_limit="100/second;2000/minute").rate_limit
    assert "x" * 16 not in repr(Settings(admin_key="x" * 16))  # a secret, not shown


def test_limiter_counts_per_identity_and_says_when_to_retry() -> None:
    limiter = Limiter("2/minute", "memory://")
    assert limiter.retry_after("key:a") is None and limiter.retry_after("key:a") is None
    wait = limiter.retry_after("key:a")
    assert wait is not None and 1 <= wait <= 60
    assert limiter.retry_after("key:b") is None
    assert limiter.describe() == "2 per 1 minute"


def test_no_limit_configured_means_no_limiter() -> None:
    assert limiter_from_settings(Settings(rate_limit="")) is None
    made = limiter_from_settings(Settings(rate_limit="5/second", broker_url=None))
    assert made is not None and made.retry_after("x") is None


def test_keys_are_random_and_stored_as_sha256() -> None:
    first, second = generate_key(), generate_key()
    assert first != second and first.startswith("mk_") and len(first) >= 40
    assert hash_key(first) == hashlib.sha256(first.encode()).hexdigest() != hash_key(second)


@pytest.mark.parametrize(
    ("tenant_id", "valid"),
    [("acme", True), ("a.b:c@d-e_f", True), ("a/b", False), ("", False), ("x" * 65, False)],
)
def test_tenant_ids(tenant_id: str, valid: bool) -> None:
    assert is_valid_tenant_id(tenant_id) is valid


def test_failed_authentication_limit_settings() -> None:
    assert Settings().auth_failure_limit == "20/minute"  # on by default
    with pytest.raises(ValidationError, match="rate limit"):
        Settings(auth_failure_limit="often")
    assert failure_limiter_from_settings(Settings(auth_failure_limit="")) is None
    limiter = failure_limiter_from_settings(Settings(auth_failure_limit="1/minute"))
    assert limiter is not None and limiter.exhausted("1.2.3.4") is None  # testing counts nothing
    assert limiter.retry_after("1.2.3.4") is None
    assert limiter.exhausted("1.2.3.4") is not None and limiter.exhausted("5.6.7.8") is None


def _request(headers: dict[str, str], peer: str = "198.51.100.7") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "headers": raw, "client": (peer, 1234)})


def test_the_client_address_honours_only_a_configured_proxy_header() -> None:
    forwarded = {"X-Forwarded-For": "203.0.113.1, 10.0.0.9"}
    assert client_address(_request(forwarded), Settings()) == "198.51.100.7"
    trusting = Settings(trusted_proxy_header="X-Forwarded-For")
    assert client_address(_request(forwarded), trusting) == "10.0.0.9"  # what the proxy saw
    assert client_address(_request({}), trusting) == "198.51.100.7"  # header missing


@pytest.mark.parametrize(
    ("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("2w", 1209600)]
)
def test_key_lifetimes(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["0d", "d", "30", "3y", "-1d", "1.5h"])
def test_bad_key_lifetimes(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
