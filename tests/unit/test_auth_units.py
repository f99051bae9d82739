"""Settings of auth and rate limits, the in-process limiter, and the shape of API keys."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from memora.config import Settings
from memora.store.tenants import generate_key, hash_key, is_valid_tenant_id
from services.api.ratelimit import Limiter, limiter_from_settings


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
