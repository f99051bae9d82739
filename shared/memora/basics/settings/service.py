"""The sections about the running services: where they listen and store, who may call them and
how much, what they log and measure, and how webhooks are delivered."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from memora.basics.settings.section import Section, env_names, shown_default

# Where clients look for the broker when MEMORA_BROKER_URL is unset (memora serve sets it).
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"


class Infrastructure(Section):
    """Infrastructure

    Where the stack's services listen, the database and broker they use, and what readiness
    waits for. With neither `MEMORA_DATABASE_URL` nor `MEMORA_BROKER_URL` set, `memora serve`
    starts an embedded PostgreSQL and a private Redis (docs/operations.md)."""

    environment: Literal["development", "production"] = Field(
        default="development",
        description="`production` refuses placeholder secrets (`change-me`, `password`, ...) "
        "in URLs and keys at start (docs/deploy.md, Secrets).",
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=env_names("MEMORA_DATABASE_URL", "MEMORA_API_DATABASE_URL"),
        description="PostgreSQL (with pgvector) connection URL. Unset: `memora serve` starts "
        "an embedded PostgreSQL under `MEMORA_DATA_DIR` and sets it for its processes.",
    )
    read_database_url: str | None = Field(
        default=None,
        description="A streaming replica of the database the query service reads from (search, "
        "recall, conversation search); writes stay on `MEMORA_DATABASE_URL`. Unset: reads go to "
        "the primary (`memora serve` sets it with `MEMORA_READ_REPLICAS=1`). docs/scaling.md",
    )
    read_replicas: int = Field(
        default=0,
        ge=0,
        le=1,
        description="`memora serve` with an embedded PostgreSQL: 1 starts a streaming standby of "
        "it (pg_basebackup) and points the query service's reads at it.",
    )
    read_max_lag_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A replica lagging more than this (or not answering) sends reads to the "
        "primary until it catches up.",
    )
    read_after_wait_ms: float = Field(
        default=2000.0,
        ge=0,
        description="A read with `after_operation` waits this long for the replica to replay "
        "the operation, then reads the primary.",
    )
    read_after_timeout_seconds: float = Field(
        default=10.0,
        ge=0,
        description="A read with `after_operation` waits this long for the operation to finish, "
        "then answers without it and says so (`X-Memora-Operation-Pending`).",
    )
    broker_url: str | None = Field(
        default=None,
        description="Redis URL of the Celery broker. Unset: `memora serve` starts a private "
        f"Redis; clients then look at `{DEFAULT_BROKER_URL}`.",
    )
    data_dir: Path = Field(
        default_factory=lambda: Path(tempfile.gettempdir()) / "memora",
        json_schema_extra=shown_default("`$TMPDIR/memora`"),
        description="Where the embedded PostgreSQL, the worker heartbeat, the metrics of "
        "multi-process workers and backfill checkpoints are kept.",
    )
    host: str = Field(
        default="127.0.0.1", description="Address the write API and query service bind to."
    )
    port: int = Field(default=8080, description="Port of the write API (and the web UI).")
    query_port: int = Field(
        default=8081,
        json_schema_extra=shown_default("`MEMORA_PORT` + 1"),
        description="Port of the query service; unset, the write API's port + 1, so that two "
        "stacks on one machine do not collide.",
    )
    query_url: str | None = Field(
        default=None,
        description="Where the write API forwards read routes (search, think); unset: no "
        "forwarding.",
    )
    ready_scope: Literal["self", "stack"] = Field(
        default="self",
        description="What the write API's `/health/ready` waits for: `self`, its database (a "
        "Kubernetes pod's readiness), or `stack`, also the query service and a worker on each "
        "of `MEMORA_READY_QUEUES`, as `/health/stack` always does (`memora serve`, docker "
        "compose). docs/operations.md",
    )
    ready_queues: str | None = Field(
        default=None,
        description="Comma-separated queues a stack-wide readiness needs a worker on; unset: "
        "every stage's live queue.",
    )
    api_url: str | None = Field(
        default=None,
        description="The write API the CLI's HTTP clients talk to (`memora backfill`, "
        "`memora import`); unset: `http://MEMORA_HOST:MEMORA_PORT`.",
    )
    api_key: SecretStr | None = Field(
        default=None, description="The API key those CLI clients send, when the API needs one."
    )
    bench_results_dir: Path | None = Field(
        default=None,
        description="A folder of benchmark results files (`memora bench ... --out`) that the "
        "web UI's Results view lists; unset: the view shows uploaded files only.",
    )
    embedded_pg_shared_buffers: str = Field(
        default="1GB",
        description="`shared_buffers` of the embedded PostgreSQL (when `MEMORA_DATABASE_URL` "
        "is unset).",
    )
    db_pool_min: int = Field(
        default=1, description="Connections a process's database pool keeps open at least."
    )
    db_pool_max: int = Field(
        default=10, description="Connections a process's database pool opens at most."
    )
    row_security: bool = Field(
        default=True,
        description="Tenant work runs as the `memora_tenant` role, confined by row-level "
        "security to the caller's tenant. Off: connections keep the login role (a superuser "
        "login is then not confined); for benchmarks and comparisons only.",
    )

    @field_validator("api_key", mode="before")
    @classmethod
    def _api_key_unset_if_empty(cls, value: object) -> object:
        return None if value == "" else value

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


class AccessAndLimits(Section):
    """API: authentication, rate limits and input limits

    Who may call the APIs and how much (docs/security.md), and the largest requests they
    accept."""

    auth_required: bool = Field(
        default=False,
        description="Every request needs an API key (compose, Kubernetes). Off: the embedded "
        "single-user default, where requests without a key act in the `default` tenant.",
    )
    admin_key: SecretStr | None = Field(
        default=None,
        description="A bootstrap key (16 characters or more) accepted as an admin of the "
        "`default` tenant.",
    )
    rate_limit: str = Field(
        default="",
        description="Limits per API key (per client address for requests without one), in the "
        '`limits` package\'s notation separated by ";", e.g. `100/second;2000/minute`. '
        "Empty: no limit.",
    )
    rate_limit_strategy: Literal["moving-window", "fixed-window", "sliding-window-counter"] = Field(
        default="moving-window", description="How the `limits` package counts."
    )
    rate_limit_storage_url: str | None = Field(
        default=None,
        description="Where the rate-limit counters live; unset: the broker's Redis "
        "(`memory://` counts per process).",
    )
    auth_failure_limit: str = Field(
        default="20/minute",
        description="Failed authentications (no, unknown, revoked or expired key) allowed per "
        "client address, in the same notation and storage; over it, 429 before the key is "
        "looked up. Empty: off.",
    )
    trusted_proxy_header: str | None = Field(
        default=None,
        description="The header carrying the client's address when a trusted proxy sets it "
        "(e.g. `X-Forwarded-For`, its last entry is used); unset: the connection's peer.",
    )
    max_body_bytes: int = Field(
        default=10 * 1024 * 1024, description="Largest request body (10 MiB); over it: 413."
    )
    max_body_drain_bytes: int = Field(
        default=64 * 1024 * 1024,
        description="A body over `MEMORA_MAX_BODY_BYTES` is read and discarded up to this many "
        "bytes more before the 413 is sent, so that clients which send the whole body before "
        "reading get the 413 instead of a reset connection; beyond it the connection closes.",
    )
    max_items_per_batch: int = Field(
        default=1000, description="Items one `POST /api/memories/batch` may carry."
    )
    max_import_bytes: int = Field(
        default=2 * 1024 * 1024 * 1024,
        description="Largest export file `POST /api/import` takes (NDJSON, spooled to disk as "
        "it arrives): 2 GiB.",
    )
    max_content_chars: int = Field(
        default=200_000, description="Longest content of one item or message, in characters."
    )

    @field_validator("admin_key", mode="before")
    @classmethod
    def _admin_key_unset_if_empty(cls, value: object) -> object:
        return None if value == "" else value


class Observability(Section):
    """Observability

    Logs, metrics and heartbeats (docs/operations.md). Tracing is configured by the standard
    `OTEL_*` variables only."""

    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Logs on stderr: `text` (readable lines) or `json` (one object per line); "
        "the fields a log call passes (operation, stage, attempt...) are printed in both.",
    )
    log_level: str = Field(default="INFO", description="Log level of every process.")
    worker_metrics_port: int = Field(
        default=9540, description="Port of a worker's `/metrics` server; 0: no server."
    )
    worker_heartbeat_file: Path | None = Field(
        default=None,
        description="The file a worker touches while its consumer is alive (`memora "
        "worker-ready` reads it); unset: `<MEMORA_DATA_DIR>/worker.heartbeat`.",
    )
    metrics_cache_seconds: float = Field(
        default=10.0,
        description="How long scrape-time gauges that cost a query (queue depths, operations "
        "per state) are cached.",
    )
    beat_heartbeat_seconds: float = Field(
        default=30.0,
        description="How often beat stamps its heartbeat "
        "(`memora_beat_last_heartbeat_timestamp_seconds`).",
    )


class Webhooks(Section):
    """Webhooks

    Delivery of webhook events (docs/webhooks.md): timeouts, retries and the sweep that finds
    deliveries due."""

    webhook_allow_private: bool = Field(
        default=False,
        description="Allow targets on private, loopback, link-local or reserved addresses, "
        "refused otherwise at registration and at each delivery (a guard against server-side "
        "request forgery). Only where every receiver is trusted (tests, one machine).",
    )
    webhook_connect_timeout_seconds: float = Field(
        default=5.0, description="Connect timeout of one delivery attempt."
    )
    webhook_timeout_seconds: float = Field(
        default=10.0, description="One attempt's limit, from connecting to the last byte."
    )
    webhook_retry_base_seconds: float = Field(
        default=5.0,
        description="A failed attempt is retried after base x 2^(attempt - 1) seconds.",
    )
    webhook_retry_max_delay_seconds: float = Field(
        default=3600.0, description="The longest wait between two attempts."
    )
    webhook_retry_window_seconds: float = Field(
        default=86400.0,
        description="How long after the event attempts go on; then the delivery is failed.",
    )
    webhook_sweep_interval_seconds: float = Field(
        default=5.0,
        description="How often the webhook worker looks for deliveries that are due "
        "(retries, lost sends).",
    )
    webhook_redispatch_after_seconds: float = Field(
        default=300.0,
        description="How long a delivery's task may wait in the queue before it is taken for "
        "lost and sent again.",
    )
