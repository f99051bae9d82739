"""MEMORA_ENVIRONMENT=production refuses placeholder secrets at start; development takes them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memora.basics.config import Settings

REAL = {
    "database_url": "postgresql://memora:Xq7-long-random-value@db:5432/memora",
    "broker_url": "redis://:Another-random-value@redis:6379/0",
    "llm_api_key": "sk-live-0123456789abcdef",
    "admin_key": "k3y-0123456789abcdef",
}


def test_production_starts_with_real_secrets() -> None:
    settings = Settings(environment="production", **REAL)  # type: ignore[arg-type]
    assert settings.placeholder_secrets() == []


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("database_url", "postgresql://memora:change-me@postgres:5432/memora", "DATABASE_URL"),
        ("database_url", "postgresql://memora:memora@postgres:5432/memora", "DATABASE_URL"),
        ("broker_url", "redis://:CHANGEME@redis:6379/0", "BROKER_URL"),
        ("llm_api_key", "change-me", "LLM_API_KEY"),
        ("admin_key", "change-me-to-a-long-admin-key", "ADMIN_KEY"),
        ("admin_key", "replace-me-0123456789", "ADMIN_KEY"),
    ],
)
def test_production_refuses_each_placeholder(field: str, value: str, named: str) -> None:
    with pytest.raises(ValidationError, match=f"placeholder secrets in production: MEMORA_{named}"):
        Settings(environment="production", **{**REAL, field: value})  # type: ignore[arg-type]
    # the same value is accepted outside production, and reported
    relaxed = Settings(**{**REAL, field: value})  # type: ignore[arg-type]
    assert relaxed.placeholder_secrets() == [f"MEMORA_{named}"]


def test_environment_comes_from_memora_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORA_ENVIRONMENT", "production")
    monkeypatch.setenv("MEMORA_DATABASE_URL", "postgresql://memora:change-me@postgres/memora")
    with pytest.raises(ValidationError, match="MEMORA_DATABASE_URL"):
        Settings()
    monkeypatch.setenv("MEMORA_ENVIRONMENT", "staging")
    with pytest.raises(ValidationError):
        Settings()  # only development or production
