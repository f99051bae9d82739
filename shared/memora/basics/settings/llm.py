"""The section about extraction and the LLM: which extractor runs, the OpenAI-compatible
endpoint and its per-operation models, what extraction keeps, and the benchmarks' judge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from memora.basics.settings.section import Section, env_names

LLMProvider = Literal["openai", "groq", "ollama"]
# The base URL and model a provider implies, where the project's default would not exist there.
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


class ExtractionAndLLM(Section):
    """Extraction and LLM

    Any OpenAI-compatible chat endpoint serves five operations: extraction, think, opinions,
    background and a search's follow-up round (docs/llm.md). The endpoint's settings are also
    read under seed 003's names (`MEMORA_API_LLM_*`, then `LLM_*`); today's name wins. Without
    an LLM, ingestion uses the local extractor and search needs none (but for `follow_up`)."""

    extractor: Literal["auto", "local", "llm"] = Field(
        default="auto",
        description="Which extractor the extract stage runs: `local` (verbatim turns, spaCy "
        "entities), `llm`, or `auto`, the LLM when one is configured.",
    )
    llm_provider: LLMProvider | None = Field(
        default=None,
        validation_alias=env_names(
            "MEMORA_LLM_PROVIDER", "MEMORA_API_LLM_PROVIDER", "LLM_PROVIDER"
        ),
        description="`openai`, `groq` or `ollama`: sets the base URL (and the model) unless "
        "they are given. `openai` and `groq` need a key (start-up fails without one).",
    )
    llm_base_url: str | None = Field(
        default=None,
        validation_alias=env_names(
            "MEMORA_LLM_BASE_URL", "MEMORA_API_LLM_BASE_URL", "LLM_BASE_URL"
        ),
        description="The endpoint's base URL, ending in `/v1`; unset: the provider's. With no "
        "provider, no base URL and no key there is no LLM.",
    )
    llm_api_key: str | None = Field(
        default=None,
        validation_alias=env_names("MEMORA_LLM_API_KEY", "MEMORA_API_LLM_API_KEY", "LLM_API_KEY"),
        description="The endpoint's key; a key alone means OpenAI itself.",
    )
    llm_model: str = Field(
        default="gpt-4o-mini",
        validation_alias=env_names("MEMORA_LLM_MODEL", "MEMORA_API_LLM_MODEL", "LLM_MODEL"),
        description="The model of every operation without a model of its own; with a "
        "provider and no model given, the provider's.",
    )
    llm_extraction_model: str | None = Field(
        default=None, description="The extraction's model; unset: `MEMORA_LLM_MODEL`."
    )
    llm_think_model: str | None = Field(
        default=None, description="Think's model (the agent's answer); unset: the main one."
    )
    llm_opinion_model: str | None = Field(
        default=None, description="The opinion extraction's model; unset: the main one."
    )
    llm_background_model: str | None = Field(
        default=None, description="The background merge's model; unset: the main one."
    )
    llm_search_model: str | None = Field(
        default=None,
        description="The model that plans a search's follow-up queries (`follow_up`: a small, "
        "fast one does); unset: the main one.",
    )
    llm_timeout_seconds: float = Field(default=60.0, description="Timeout of one HTTP attempt.")
    llm_max_retries: int = Field(
        default=3,
        description="Extra attempts on 408, 409, 429 and 5xx answers, timeouts and refused "
        "connections.",
    )
    llm_backoff_seconds: float = Field(
        default=0.5,
        description="Back-off base: min(max, base x 2^attempt) x jitter; a `Retry-After` "
        "header is honoured up to the maximum.",
    )
    llm_backoff_max_seconds: float = Field(default=8.0, description="Longest back-off.")
    llm_invalid_output_retries: int = Field(
        default=2,
        description="Re-asks when a structured answer is not valid JSON or fails its schema.",
    )
    llm_json_mode: bool = Field(
        default=True,
        description='Send `response_format: {"type": "json_object"}` for structured answers; '
        "turn off for servers that reject it (the schema is in the prompt either way).",
    )
    llm_temperature: float | None = Field(
        default=None, description="Sampling temperature; unset: the provider's default."
    )
    llm_chunk_chars: int = Field(
        default=120_000,
        description="Extraction sends a document in chunks of at most this many characters.",
    )
    extraction_context_messages: int = Field(
        default=10,
        description="Earlier messages of an append that an extraction call sees before its "
        "items, at most; 0: none.",
    )
    extraction_context_chars: int = Field(
        default=2000, description="Characters of those earlier messages, at most."
    )
    importance_minimum: float | None = Field(
        default=None,
        ge=1,
        le=10,
        description="Facts rated below it (1-10) are not stored. Unset: 3 for the LLM "
        "extractor (seed 002's default), no floor for the local one, whose turns are kept "
        'verbatim (docs/llm.md, "What is kept").',
    )
    extraction_confidence: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="The LLM extractor's facts it rates less certain than this (0-1) are not "
        "stored unless the user asked to remember them (seed 002's extractionConfidence); "
        "0: all kept. The local extractor's turns are verbatim and not rated.",
    )
    extraction_completeness: bool = Field(
        default=True,
        description="Check that each fact of the LLM extractor is a complete statement (a "
        "subject and a verb, seed 000 §2.2) and re-ask once for those that are not: a rewrite "
        "replaces the fact, one the model drops is not stored.",
    )
    sensitive_categories: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["health"],
        description="Comma-separated categories of sensitive information that the LLM "
        "extractor tags and that are not stored unless the user asked to remember them; "
        "empty: none.",
    )
    opinion_same_topic_similarity: float = Field(
        default=0.92,
        description="An opinion at least this similar to the agent's current one is stored "
        "as its new version (superseding it) rather than as a new opinion.",
    )
    judge_llm_provider: LLMProvider | None = Field(
        default=None,
        validation_alias=env_names("MEMORA_JUDGE_LLM_PROVIDER", "JUDGE_LLM_PROVIDER"),
        description="The benchmarks' judge of answers: its own provider; unset (and no base "
        'URL): the main LLM (docs/llm.md, "The judge LLM").',
    )
    judge_llm_base_url: str | None = Field(
        default=None,
        validation_alias=env_names("MEMORA_JUDGE_LLM_BASE_URL", "JUDGE_LLM_BASE_URL"),
        description="The judge's own endpoint; unset: its provider's, else the main one's.",
    )
    judge_llm_api_key: str | None = Field(
        default=None,
        validation_alias=env_names("MEMORA_JUDGE_LLM_API_KEY", "JUDGE_LLM_API_KEY"),
        description="The judge's key; unset: the main key, only when the judge's endpoint is "
        "the main one's URL (a key is never sent to another host).",
    )
    judge_llm_model: str | None = Field(
        default=None,
        validation_alias=env_names("MEMORA_JUDGE_LLM_MODEL", "JUDGE_LLM_MODEL"),
        description="The judge's model; unset: its provider's, else the main model.",
    )

    @field_validator("llm_provider", "judge_llm_provider", mode="before")
    @classmethod
    def _provider_unset_if_empty(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("sensitive_categories", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, list):
            return [str(v).strip().lower() for v in value if str(v).strip()]
        return value

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
