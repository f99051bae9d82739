"""Settings, read once from MEMORA_* environment variables (and an optional .env file).

`Settings` composes the sections of memora.basics.settings (one class per concern, each field
with its description) and holds what spans them: the providers' defaults, the checks at start,
the placeholder secrets refused in production. docs/configuration.md is generated from it
(`python -m memora.basics.settings_doc`); the environment is checked against it at start-up
(`report_environment`)."""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from limits import parse_many
from pydantic import AliasChoices, PrivateAttr, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from memora.basics.settings.conversations import ConversationSearch
from memora.basics.settings.lifecycle import Lifecycle
from memora.basics.settings.llm import (
    LLM_PROVIDER_MODELS,
    LLM_PROVIDER_URLS,
    ExtractionAndLLM,
    LLMProvider,
)
from memora.basics.settings.pipeline import (
    DEFAULT_EMBEDDING_MODEL,
    EMBEDDING_PROVIDER_URLS,
    Embedding,
    EmbeddingProvider,
    EntitiesAndLinks,
    Pipeline,
)
from memora.basics.settings.retrieval import Reranking, Retrieval
from memora.basics.settings.section import Section
from memora.basics.settings.service import (
    DEFAULT_BROKER_URL,
    AccessAndLimits,
    Infrastructure,
    Observability,
    Webhooks,
)

__all__ = [
    "DEFAULT_BROKER_URL",
    "DEFAULT_EMBEDDING_MODEL",
    "EMBEDDING_PROVIDER_URLS",
    "FOREIGN_PREFIXES",
    "FOREIGN_VARIABLES",
    "LLM_PROVIDER_MODELS",
    "LLM_PROVIDER_URLS",
    "PLACEHOLDER_SECRETS",
    "SECTIONS",
    "SEED_VARIABLES",
    "EmbeddingProvider",
    "LLMEndpoint",
    "LLMProvider",
    "Settings",
    "env_names_of",
    "get_settings",
    "judge_llm_settings",
    "known_variables",
    "report_environment",
]

# Values that example files and defaults put in place of a secret: refused in production.
PLACEHOLDER_SECRETS = frozenset(
    {"change-me", "changeme", "replace-me", "password", "secret", "admin", "memora", "example"}
)
# MEMORA_* variables read by something other than these settings (compose files, KEDA, load
# tests, test switches): never reported as unknown.
FOREIGN_VARIABLES = frozenset(
    {"MEMORA_IMAGE", "MEMORA_GPU_IMAGE", "MEMORA_REDIS_ADDRESS", "MEMORA_FUZZ_EXAMPLES",
     "MEMORA_UI_SCREENSHOTS"}
)  # fmt: skip
FOREIGN_PREFIXES = ("MEMORA_LT_", "MEMORA_TEST_")
# Seed 003's variables that Memora has no setting for, each with why (reported as such, not
# with the nearest setting's name).
SEED_VARIABLES = {
    "MEMORA_CP_DATAPLANE_API_URL": "seed 003's control plane reaches the API there; Memora's UI "
    "is served by the write API itself (GET /) and calls it on the same origin, so nothing "
    "needs it (docs/ui.md)",
}
# The sections of the settings, in the order of docs/configuration.md.
SECTIONS: tuple[type[Section], ...] = (
    Infrastructure,
    AccessAndLimits,
    Pipeline,
    ExtractionAndLLM,
    Embedding,
    EntitiesAndLinks,
    Retrieval,
    Reranking,
    ConversationSearch,
    Lifecycle,
    Webhooks,
    Observability,
)

log = logging.getLogger("memora.config")


class Settings(
    Infrastructure,
    AccessAndLimits,
    Pipeline,
    ExtractionAndLLM,
    Embedding,
    EntitiesAndLinks,
    Retrieval,
    Reranking,
    ConversationSearch,
    Lifecycle,
    Webhooks,
    Observability,
    BaseSettings,
):
    """Every setting, each a flat attribute read from its MEMORA_* variable (and the names in
    its `validation_alias`), grouped by concern in the sections it inherits
    (memora.basics.settings; docs/configuration.md)."""

    # extra="ignore": a .env file may hold other programs' variables; unknown MEMORA_* ones are
    # reported at start-up (report_environment).
    model_config = SettingsConfigDict(
        env_prefix="MEMORA_", env_file=".env", extra="ignore", populate_by_name=True
    )
    _query_port_derived: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _apply_providers(self) -> Settings:
        """A provider fills in its base URL (and a model that exists there) unless given."""
        if self.llm_provider is not None:
            if not self.llm_base_url:
                self.llm_base_url = LLM_PROVIDER_URLS[self.llm_provider]
            if "llm_model" not in self.model_fields_set:
                self.llm_model = LLM_PROVIDER_MODELS[self.llm_provider]
            if self.llm_provider != "ollama" and not self.llm_api_key:
                raise ValueError(
                    f"MEMORA_LLM_PROVIDER={self.llm_provider} needs MEMORA_LLM_API_KEY "
                    "(or MEMORA_API_LLM_API_KEY); only ollama runs without a key"
                )
        if self.embedding_provider != "local":
            if not self.embedding_base_url:
                self.embedding_base_url = EMBEDDING_PROVIDER_URLS[self.embedding_provider]
            if self.embedding_model == DEFAULT_EMBEDDING_MODEL:
                raise ValueError(
                    f"MEMORA_EMBEDDING_PROVIDER={self.embedding_provider} needs "
                    "MEMORA_EMBEDDING_MODEL: the model's name at that endpoint"
                )
        return self

    @model_validator(mode="after")
    def _derive_query_port(self) -> Settings:
        if "query_port" not in self.model_fields_set:
            self.query_port = self.port + 1
            self._query_port_derived = True
        return self

    @property
    def query_port_derived(self) -> bool:
        """The query port is the API's + 1, not set (`memora serve` may take another)."""
        return self._query_port_derived

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if not 0 < self.entity_match_threshold <= 1:
            raise ValueError("MEMORA_ENTITY_MATCH_THRESHOLD must be in (0, 1]")
        if self.embedding_dim <= 0:
            raise ValueError("MEMORA_EMBEDDING_DIM must be positive")
        if not 0 <= self.mmr_lambda <= 1:
            raise ValueError("MEMORA_MMR_LAMBDA must be in [0, 1]")
        if self.search_concurrency < 1 or self.rerank_candidates < 1:
            raise ValueError("MEMORA_SEARCH_CONCURRENCY and MEMORA_RERANK_CANDIDATES must be >= 1")
        if self.cross_encoder_batch_size < 1 or self.cross_encoder_batch_tokens < 0:
            raise ValueError("MEMORA_CROSS_ENCODER_BATCH_SIZE must be >= 1 and _BATCH_TOKENS >= 0")
        if min(self.cross_encoder_batch_wait_ms, self.embedding_batch_wait_ms) < 0:
            raise ValueError("MEMORA_*_BATCH_WAIT_MS must be >= 0")
        if self.admin_key is not None and len(self.admin_key.get_secret_value()) < 16:
            raise ValueError("MEMORA_ADMIN_KEY must be at least 16 characters")
        for spec in (self.rate_limit, self.auth_failure_limit):
            if spec.strip():
                parse_many(spec)  # ValueError when it does not parse
        if self.environment == "production" and (placeholders := self.placeholder_secrets()):
            raise ValueError(
                f"placeholder secrets in production: {', '.join(placeholders)} "
                "(set real values; docs/deploy.md, Secrets)"
            )
        return self

    def placeholder_secrets(self) -> list[str]:
        """The settings whose secret (a password in a URL, a key) is a known placeholder."""
        admin_key = self.admin_key.get_secret_value() if self.admin_key else None
        secrets = {
            "MEMORA_DATABASE_URL": _url_password(self.database_url),
            "MEMORA_BROKER_URL": _url_password(self.broker_url),
            "MEMORA_RATE_LIMIT_STORAGE_URL": _url_password(self.rate_limit_storage_url),
            "MEMORA_LLM_API_KEY": self.llm_api_key,
            "MEMORA_EMBEDDING_API_KEY": (
                self.embedding_api_key.get_secret_value() if self.embedding_api_key else None
            ),
            "MEMORA_ADMIN_KEY": admin_key,
        }
        return [name for name, value in secrets.items() if value and _is_placeholder(value)]

    @property
    def ready_queue_names(self) -> list[str]:
        """The queues a stack-wide readiness needs a worker on (MEMORA_READY_QUEUES)."""
        if self.ready_queues is None:
            from memora.basics.stages import live_queues

            return live_queues()
        return [q.strip() for q in self.ready_queues.split(",") if q.strip()]


def _url_password(url: str | None) -> str | None:
    return urlsplit(url).password if url else None


def _is_placeholder(value: str) -> bool:
    word = value.strip().lower()
    return word in PLACEHOLDER_SECRETS or any(
        word.startswith(p)
        for p in ("change-me", "changeme", "replace-me", "placeholder", "your_", "your-")
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


# ------------------------------------------------------------------------------- the judge
@dataclass(frozen=True)
class LLMEndpoint:
    """One OpenAI-compatible chat endpoint: where, with which key and model."""

    provider: str | None
    base_url: str | None
    api_key: str | None
    model: str

    def apply(self, settings: Settings) -> Settings:
        """`settings` with this endpoint as its LLM, every operation on its model: what
        `LLMClient(...)` takes."""
        return settings.model_copy(
            update={
                "llm_provider": self.provider,
                "llm_base_url": self.base_url,
                "llm_api_key": self.api_key,
                "llm_model": self.model,
                **{f"llm_{op}_model": None for op in ("extraction", "think", "opinion")},
                "llm_background_model": None,
            }
        )


def judge_llm_settings(settings: Settings | None = None) -> LLMEndpoint:
    """The LLM that grades benchmark answers (JUDGE_LLM_*), each part falling back to the main
    LLM's while the judge names no endpoint of its own (provider or base URL). With its own
    endpoint it gets that provider's base URL and model, and the main key only when both
    endpoints are the same URL (a key is never sent to another host)."""
    s = settings or get_settings()
    main = LLMEndpoint(s.llm_provider, s.llm_base_url, s.llm_api_key, s.llm_model)
    if not (s.judge_llm_provider or s.judge_llm_base_url):
        return LLMEndpoint(
            main.provider, main.base_url, s.judge_llm_api_key or main.api_key,
            s.judge_llm_model or main.model,
        )  # fmt: skip
    provider = s.judge_llm_provider
    base_url = s.judge_llm_base_url or LLM_PROVIDER_URLS[provider or "openai"]
    same_host = base_url.rstrip("/") == (main.base_url or "").rstrip("/")
    api_key = s.judge_llm_api_key or (main.api_key if same_host else None)
    if provider not in (None, "ollama") and not api_key:
        raise ValueError(f"JUDGE_LLM_PROVIDER={provider} needs JUDGE_LLM_API_KEY")
    model = s.judge_llm_model or (LLM_PROVIDER_MODELS[provider] if provider else main.model)
    return LLMEndpoint(provider, base_url, api_key, model)


# ---------------------------------------------------------------- the environment, checked
def env_names_of(field_name: str, info: FieldInfo) -> list[str]:
    """The environment names a setting is read from, the first present winning."""
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice).upper() for choice in alias.choices]
    return [f"MEMORA_{field_name.upper()}"]


def known_variables() -> frozenset[str]:
    """Every environment name the settings read, seed 003's included."""
    return frozenset(
        name
        for field_name, info in Settings.model_fields.items()
        for name in env_names_of(field_name, info)
    )


def report_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warn (and return the warnings) about each unknown MEMORA_* variable, naming the nearest
    known one, and about a setting given under two names (the first of `_names` wins). Called
    at start-up by the API, the query service, workers and the CLI; the .env file counts too."""
    env = {k.upper(): v for k, v in _dotenv().items()}
    env.update({k.upper(): v for k, v in (os.environ if environ is None else environ).items()})
    known = known_variables()
    warnings: list[str] = []
    for name in sorted(env):
        if not name.startswith("MEMORA_") or name in known or name in FOREIGN_VARIABLES:
            continue
        if name.startswith(FOREIGN_PREFIXES):
            continue
        if name in SEED_VARIABLES:
            warnings.append(f"{name} is not needed: {SEED_VARIABLES[name]}")
            continue
        nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        warnings.append(f"unknown setting {name} is ignored{hint}")
    for field_name, info in Settings.model_fields.items():
        given = [n for n in env_names_of(field_name, info) if n in env]
        if len(given) > 1 and len({env[n] for n in given}) > 1:
            warnings.append(f"{' and '.join(given)} are both set: {given[0]} is used")
    for warning in warnings:
        log.warning(warning)
    return warnings


def _dotenv() -> dict[str, str]:
    path = Path(".env")
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}
