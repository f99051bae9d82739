"""Every Prometheus metric Memora exports, defined once, and small functions that record them.

The services only glue these to their frameworks (services/api/metrics.py: an ASGI middleware
and /metrics; services/workers/metrics.py: Celery signals and a metrics server). docs/operations.md
lists the metrics and what they mean. Their exposition (`render`, the multiprocess files):
memora.basics.exposition, re-exported here.

Several processes (Celery's prefork pool, uvicorn --workers): set PROMETHEUS_MULTIPROC_DIR to an
empty directory, one per worker instance, *before* the process starts; prometheus-client then
keeps values in files there and `render()` adds up all processes. Each gauge says how to combine
processes (`multiprocess_mode`): pool connections add up over live processes, scrape-time
gauges (queue depth, operations per state) take the most recent value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, Histogram

from memora.basics.cache_metrics import *  # noqa: F403 - the read caches' (registered here too)

# exposition: re-exported, the services reach them here
from memora.basics.exposition import NAMESPACE as NAMESPACE
from memora.basics.exposition import exposition_registry as exposition_registry
from memora.basics.exposition import mark_process_dead as mark_process_dead
from memora.basics.exposition import metric_names as metric_names
from memora.basics.exposition import multiprocess_dir as multiprocess_dir
from memora.basics.exposition import remove_stale_files as remove_stale_files
from memora.basics.exposition import render as render
from memora.basics.stages import OperationStatus, Stage

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TASK = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
# POST -> searchable: seconds for live traffic, up to hours for a large backfill.
_LAG = (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 12 * 3600)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)

# ---------------------------------------------------------------------------------- HTTP
HTTP_REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered, by service, method, route template and status code",
    ["service", "method", "route", "status"],
    namespace=NAMESPACE,
)
HTTP_LATENCY = Histogram(
    "http_request_duration_seconds",
    "HTTP request latency (until the response started), by route template and status code",
    ["service", "method", "route", "status"],
    namespace=NAMESPACE,
    buckets=_LATENCY,
)
HTTP_IN_PROGRESS = Gauge(
    "http_requests_in_progress",
    "HTTP requests being served, scrapes and health probes left out (query autoscaling signal)",
    ["service"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)

# ---------------------------------------------------------------------------------- tasks
TASK_DURATION = Histogram(
    "task_duration_seconds",
    "Run time of one pipeline task attempt, by stage and queue",
    ["stage", "queue"],
    namespace=NAMESPACE,
    buckets=_TASK,
)
TASK_SUCCESSES = Counter(
    "task_successes", "Task attempts that succeeded", ["stage", "queue"], namespace=NAMESPACE
)
TASK_RETRIES = Counter(
    "task_retries",
    "Task attempts that failed and were scheduled for a retry",
    ["stage", "queue", "exception"],
    namespace=NAMESPACE,
)
TASK_FAILURES = Counter(
    "task_failures",
    "Tasks that failed for good (retries exhausted or a permanent error)",
    ["stage", "queue", "exception"],
    namespace=NAMESPACE,
)
TASKS_IN_PROGRESS = Gauge(
    "tasks_in_progress",
    "Task attempts running now",
    ["stage"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)

# ---------------------------------------------------------------- queues and operations
QUEUE_DEPTH = Gauge(
    "queue_depth",
    "Messages waiting in a broker queue (read at scrape time)",
    ["queue"],
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)
QUEUE_OLDEST_AGE = Gauge(
    "queue_oldest_age_seconds", "Seconds the oldest message waiting in a broker queue has waited",
    ["queue"], namespace=NAMESPACE, multiprocess_mode="mostrecent",
)  # fmt: skip
OPERATIONS = Gauge(
    "operations",
    "Operations (accepted batches, thinks) per status (read at scrape time)",
    ["status"],
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)
OPERATIONS_ACTIVE = Gauge(
    "operations_active",
    "Queued or running operations per pipeline stage (read at scrape time)",
    ["stage"],
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)
OLDEST_ACTIVE_AGE = Gauge(
    "oldest_active_operation_age_seconds",
    "Age of the oldest queued or running operation (0 when none)",
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)
WORKERS_ANSWERING = Gauge(
    "workers_answering",
    "Celery workers that answered the write API's ping (read at scrape time, cached 5 s)",
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)
BEAT_HEARTBEAT = Gauge(
    "beat_last_heartbeat_timestamp_seconds",
    "Unix time of beat's last heartbeat task, run by a maintenance worker (read at scrape time)",
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)

# --------------------------------------------------------------------------- ingestion
INGEST_DOCUMENTS = Counter(
    "ingest_documents",
    "Documents accepted by the write API, by outcome (created, replaced, unchanged) and priority",
    ["outcome", "priority"],
    namespace=NAMESPACE,
)
INGEST_ITEMS = Counter(
    "ingest_items",
    "Items (messages) accepted by the write API, by outcome and priority",
    ["outcome", "priority"],
    namespace=NAMESPACE,
)
INGEST_LAG = Histogram(
    "ingest_lag_seconds",
    "From the POST that accepted a document to its operation completing (searchable)",
    ["priority"],
    namespace=NAMESPACE,
    buckets=_LAG,
)

# --------------------------------------------------------------------------------- LLM
LLM_REQUESTS = Counter(
    "llm_requests",
    "LLM HTTP attempts, by operation, model and outcome",
    ["operation", "model", "outcome"],
    namespace=NAMESPACE,
)
LLM_TOKENS = Counter(
    "llm_tokens",
    "LLM tokens used, by operation, model and kind (prompt, completion)",
    ["operation", "model", "kind"],
    namespace=NAMESPACE,
)
LLM_LATENCY = Histogram(
    "llm_request_duration_seconds",
    "Latency of one LLM HTTP attempt",
    ["operation", "model"],
    namespace=NAMESPACE,
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120),
)

# --------------------------------------------------------------------------- embedding
EMBED_BATCH = Histogram(
    "embedding_batch_size",
    "Texts per call of the embedding model",
    ["model"],
    namespace=NAMESPACE,
    buckets=_BATCH,
)
EMBED_TEXTS = Counter("embedding_texts", "Texts embedded", ["model"], namespace=NAMESPACE)
EMBED_DURATION = Histogram(
    "embedding_duration_seconds",
    "Time of one call of the embedding model (texts/s = rate(texts) / rate(duration_sum))",
    ["model"],
    namespace=NAMESPACE,
    buckets=_LATENCY,
)
EMBED_REQUESTS = Histogram(
    "embedding_request_duration_seconds",
    "One HTTP request to a remote embedding provider (MEMORA_EMBEDDING_PROVIDER), by outcome: "
    "ok, rate_limited, server_error, timeout, connection_error, rejected",
    ["provider", "outcome"],
    namespace=NAMESPACE,
    buckets=_LATENCY,
)
CROSS_ENCODER_BACKEND = Gauge(
    "cross_encoder_backend",
    "1 for the backend serving the cross-encoder (torch, onnx, onnx-int8), set when it loads",
    ["model", "backend"],
    namespace=NAMESPACE,
    multiprocess_mode="livemax",
)
QUERY_EMBEDDING = Gauge(
    "query_embedding_precision",
    "1 for what embeds the query service's search queries (int8, fp32), set when it loads",
    ["model", "precision"],
    namespace=NAMESPACE,
    multiprocess_mode="livemax",
)

# ----------------------------------------------------------------------------- database
DB_POOL_CONNECTIONS = Gauge(
    "db_pool_connections",
    "Connections of a psycopg pool by state (size, available, in_use, max), over live processes",
    ["pool", "state"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)
DB_POOL_WAITING = Gauge(
    "db_pool_requests_waiting",
    "Callers waiting for a pool connection",
    ["pool"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)

# --------------------------------------------- read replicas (services.api.reads records)
READ_REPLICA_LAG = Gauge(
    "read_replica_lag_seconds",
    "Seconds the query service's read replica is behind the primary (-1: it does not answer)",
    namespace=NAMESPACE,
    multiprocess_mode="liveall",
)
READS = Counter(
    "reads", "Reads of the read routes by where they went and why", ["source", "reason"],
    namespace=NAMESPACE,
)  # fmt: skip
READ_AFTER_WAIT = Histogram(
    "read_after_operation_wait_seconds", "How long reads with after_operation waited",
    namespace=NAMESPACE, buckets=_LATENCY,
)  # fmt: skip

# ---------------------------------------------------------------------------------- jobs
JOB_RUNS = Counter(
    "job_runs",
    "Periodic job runs, by job and outcome (ok, failed)",
    ["job", "outcome"],
    namespace=NAMESPACE,
)
JOB_EXAMINED = Counter(
    "job_examined", "Rows a periodic job looked at", ["job"], namespace=NAMESPACE
)
JOB_CHANGED = Counter("job_changed", "Rows a periodic job changed", ["job"], namespace=NAMESPACE)
ENTITY_NAME_CHANGES = Counter(
    "entity_name_changes",
    "Stored entities the entity_names job changed, by change (renamed, merged, removed, tidied)",
    ["change"],
    namespace=NAMESPACE,
)
LIMIT_ACTIONS = Counter(
    "limit_actions",
    "What the per-agent limits removed, by action (archived_memory: over max_memories, "
    "archived_reflection: over max_reflections, purged_archived: archived past the retention, "
    "pruned_entity: an entity removed over max_graph_nodes)",
    ["action"],
    namespace=NAMESPACE,
)
JOB_DURATION = Histogram(
    "job_duration_seconds",
    "Run time of a periodic job",
    ["job"],
    namespace=NAMESPACE,
    buckets=_TASK,
)


OPERATION_STATUSES = tuple(OperationStatus)


# ---------------------------------------------------------------------------- recording
class LLMCallLike(Protocol):
    """What memora.nlp.llm.LLMCall carries (kept structural: the core LLM client stays free of
    metrics, and this module of the LLM client)."""

    operation: str
    model: str
    outcome: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float


class UsageSource(Protocol):
    def add_listener(self, listener: Any) -> Any: ...


def observe_llm_call(call: LLMCallLike) -> None:
    LLM_REQUESTS.labels(call.operation, call.model, call.outcome).inc()
    if call.prompt_tokens:
        LLM_TOKENS.labels(call.operation, call.model, "prompt").inc(call.prompt_tokens)
    if call.completion_tokens:
        LLM_TOKENS.labels(call.operation, call.model, "completion").inc(call.completion_tokens)
    LLM_LATENCY.labels(call.operation, call.model).observe(call.seconds)


_llm_sources: list[int] = []


def install_llm_hook(usage: UsageSource) -> None:
    """Observe every LLM call recorded by `usage` (memora.nlp.llm.usage); once per registry."""
    if id(usage) in _llm_sources:
        return
    usage.add_listener(observe_llm_call)
    _llm_sources.append(id(usage))


WEBHOOK_ATTEMPTS = Counter(
    "webhook_attempts",
    "Webhook delivery attempts, by outcome (succeeded, retrying, failed)",
    ["outcome"],
    namespace=NAMESPACE,
)


def observe_job(job: str, outcome: str, seconds: float, examined: int, changed: int) -> None:
    JOB_RUNS.labels(job, outcome).inc()
    JOB_DURATION.labels(job).observe(seconds)
    JOB_EXAMINED.labels(job).inc(examined)
    JOB_CHANGED.labels(job).inc(changed)


def record_query_embedding(model: str, precision: str) -> None:
    """What embeds search queries in this process, once its embedder has loaded."""
    QUERY_EMBEDDING.clear()
    QUERY_EMBEDDING.labels(model, precision).set(1)


def record_cross_encoder(model: str, backend: str) -> None:
    """The backend the cross-encoder was loaded on: one model per process, so the gauge holds
    the last one loaded."""
    CROSS_ENCODER_BACKEND.clear()
    CROSS_ENCODER_BACKEND.labels(model, backend).set(1)


def observe_embedding(model: str, texts: int, seconds: float) -> None:
    EMBED_BATCH.labels(model).observe(texts)
    EMBED_TEXTS.labels(model).inc(texts)
    EMBED_DURATION.labels(model).observe(seconds)


def observe_embedding_request(provider: str, outcome: str, seconds: float) -> None:
    EMBED_REQUESTS.labels(provider, outcome).observe(seconds)


def observe_accepted(outcome: str, items: int, *, backfill: bool) -> None:
    priority = priority_label(backfill)
    INGEST_DOCUMENTS.labels(outcome, priority).inc()
    INGEST_ITEMS.labels(outcome, priority).inc(items)


def observe_lag(seconds: float, *, backfill: bool) -> None:
    INGEST_LAG.labels(priority_label(backfill)).observe(max(0.0, seconds))


def priority_label(backfill: bool) -> str:
    return "backfill" if backfill else "live"


def record_pool(name: str, stats: Mapping[str, int]) -> None:
    """`stats`: psycopg_pool's `pool.get_stats()`."""
    size = int(stats.get("pool_size", 0))
    available = int(stats.get("pool_available", 0))
    for state, value in (
        ("size", size),
        ("available", available),
        ("in_use", max(0, size - available)),
        ("max", int(stats.get("pool_max", 0))),
    ):
        DB_POOL_CONNECTIONS.labels(name, state).set(value)
    DB_POOL_WAITING.labels(name).set(int(stats.get("requests_waiting", 0)))


def record_queue_depths(depths: Mapping[str, int], ages: Mapping[str, float]) -> None:
    for queue, depth in depths.items():
        QUEUE_DEPTH.labels(queue).set(depth)
        QUEUE_OLDEST_AGE.labels(queue).set(ages.get(queue, 0.0))


def record_beat_heartbeat(timestamp: float | None) -> None:
    """0 until the first heartbeat; kept when the broker has none (a flushed Redis)."""
    if timestamp is not None:
        BEAT_HEARTBEAT.set(timestamp)


def record_operations(
    by_status: Mapping[OperationStatus, int], active_by_stage: Mapping[str, int], oldest_age: float
) -> None:
    for status in {*OPERATION_STATUSES, *by_status}:
        OPERATIONS.labels(status).set(by_status.get(status, 0))
    for stage in {*(s.value for s in Stage), *active_by_stage}:
        OPERATIONS_ACTIVE.labels(stage).set(active_by_stage.get(stage, 0))
    OLDEST_ACTIVE_AGE.set(oldest_age)
