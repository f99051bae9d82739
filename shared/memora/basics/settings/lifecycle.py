"""The section about the memory lifecycle (seed 002 §4; docs/lifecycle.md)."""

from __future__ import annotations

from pydantic import Field, field_validator

from memora.basics.settings.section import Section


class Lifecycle(Section):
    """Memory lifecycle

    remember, forget and recall, and the periodic jobs that consolidate, attenuate, reflect on,
    maintain and limit an agent's memories (seed 002 §4.3-4.9; docs/lifecycle.md). A job's
    interval of 0 leaves it unscheduled. The limits are defaults for every agent, which an
    agent's own `limits` override; `off` (or `none`, or empty) means no limit."""

    merge_similarity: float = Field(
        default=0.9,
        description="remember and consolidation fold a statement at least this similar into "
        "the older one (a near-duplicate).",
    )
    supersede_similarity: float = Field(
        default=0.3,
        description="From this similarity two statements are compared for a changed "
        "attribute (the newer supersedes the older; the LLM judges when configured).",
    )
    remember_candidates: int = Field(
        default=10, description="Most similar memories a remembered statement is compared with."
    )
    forget_retention_days: float = Field(
        default=30.0, description="How long a forgotten memory can be restored."
    )
    forget_query_cap: int = Field(
        default=20,
        description="forget by query refuses to take more memories than this without confirm.",
    )
    forget_query_min_similarity: float = Field(
        default=0.6, description="forget by query never takes a weaker match than this."
    )
    recall_relevance_weight: float = Field(
        default=0.4, description="recall's score: weight of similarity to the query."
    )
    recall_recency_weight: float = Field(
        default=0.2, description="recall's score: weight of recency since the last access."
    )
    recall_importance_weight: float = Field(
        default=0.3, description="recall's score: weight of importance / 10."
    )
    recall_frequency_weight: float = Field(
        default=0.1, description="recall's score: weight of access frequency."
    )
    recall_recency_half_life_days: float = Field(
        default=7.0, description="Half-life of recall's recency, in days since the last access."
    )
    reflection_threshold: float = Field(
        default=150.0,
        description="The reflect job reflects when the summed importance (1-10 each) of the "
        "memories stored since the agent's last reflection reaches it (seed 002's is 30).",
    )
    reflection_sources: int = Field(
        default=30, description="Memories a reflection reads (a deep one twice as many)."
    )
    attenuation_rate: float = Field(
        default=0.1,
        description="λ of attenuation: importance x e^(-λ x days since the last access).",
    )
    attenuation_floor: float = Field(
        default=1.0,
        description="A memory attenuated below it and unused for `MEMORA_ARCHIVE_AGE_DAYS` is "
        "archived (restorable).",
    )
    archive_age_days: float = Field(
        default=90.0, description="Days unused before an attenuated memory is archived."
    )
    graph_prune_weight: float = Field(
        default=0.0,
        description="graph_maintenance prunes generated links weaker than this; 0: none.",
    )
    job_batch_size: int = Field(
        default=500,
        description="Memories (links, entities) a lifecycle job examines per agent and run; "
        "the next run goes on from there.",
    )
    consolidate_interval_seconds: float = Field(
        default=3600.0, description="Interval of the consolidate job."
    )
    attenuate_interval_seconds: float = Field(
        default=86400.0, description="Interval of the attenuate job."
    )
    reflect_interval_seconds: float = Field(
        default=3600.0, description="Interval of the reflect job."
    )
    graph_maintenance_interval_seconds: float = Field(
        default=604800.0,
        description="Interval of the graph_maintenance job (prunes weak links, recounts "
        "entities' mentions).",
    )
    cleanup_interval_seconds: float = Field(
        default=86400.0,
        description="Interval of the cleanup job (purges forgotten memories past their "
        "retention, archived ones past the archive retention).",
    )
    entity_names_interval_seconds: float = Field(
        default=86400.0,
        description="Interval of the entity_names job, which cleans stored entity names "
        "again (merges, renames, drops noise).",
    )
    entity_relations_interval_seconds: float = Field(
        default=3600.0,
        description="Interval of the entity_relations job, which reads the relations of the "
        "memories stored before the relation reader last changed, a batch per agent a run "
        "(nothing once every agent's memories are read).",
    )
    max_memories: int | None = Field(
        default=None,
        ge=0,
        description="The most active memories (reflections and opinions aside) an agent keeps; "
        "over it the limits job archives those of lowest retention score. Unset: no limit "
        "(the seed's is 1000).",
    )
    max_reflections: int | None = Field(
        default=None,
        ge=0,
        description="The same for active reflections. Unset: no limit (the seed's is 100).",
    )
    max_graph_nodes: int | None = Field(
        default=None,
        ge=0,
        description="The most entities (the knowledge graph's nodes) an agent keeps; over it "
        "the limits job removes those least mentioned, least recently first, with their "
        "mentions and entity links (the memories stay). Unset: no limit (the seed's is 500).",
    )
    archive_retention_days: float | None = Field(
        default=None,
        gt=0,
        description="How long an archived memory stays restorable; past it, cleanup purges "
        "it. Unset: for ever (the seed's is 365).",
    )
    limits_interval_seconds: float = Field(
        default=86400.0, description="Interval of the limits job."
    )
    trash_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="How long a document in the trash (`DELETE ...?soft=true`) stays "
        "restorable; past it, the document_expiry job deletes it for real.",
    )
    temporary_chat_retention_days: float | None = Field(
        default=30.0,
        gt=0,
        description="Days after its last change that a temporary chat (a document whose "
        "messages were all stored `temporary`) is deleted for real by the document_expiry job. "
        "Unset (`off`): kept until deleted.",
    )
    document_expiry_interval_seconds: float = Field(
        default=3600.0,
        description="Interval of the document_expiry job (deletes documents in the trash past "
        "their retention, and temporary chats past theirs).",
    )

    @field_validator(
        "max_memories", "max_reflections", "max_graph_nodes", "archive_retention_days",
        "temporary_chat_retention_days", mode="before",
    )  # fmt: skip
    @classmethod
    def _limit_off(cls, value: object) -> object:
        """MEMORA_MAX_MEMORIES=off (or none, or empty): no limit."""
        off = isinstance(value, str) and value.strip().lower() in ("", "off", "none")
        return None if off else value
