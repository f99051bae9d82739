"""The section about conversation search (seed 002 §7; docs/conversations.md)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from memora.basics.settings.section import Section


class ConversationSearch(Section):
    """Conversation search

    The index of chat messages that conversation search reads: how messages are cut into
    chunks (seed 002 §7.4.1; the seed's setting names in parentheses), how their vectors are
    made, how searches score them, and the job that keeps the index consistent
    (docs/conversations.md)."""

    conversation_index: bool = Field(
        default=True,
        description="Keep the conversation index. Off: ingestion skips the `index_messages` "
        "stage and conversation search answers 409; memory search is unaffected.",
    )
    conversation_chunk_vectors: Literal["units", "embed"] = Field(
        default="units",
        description="A chunk's vector: `units`, the normalised mean of the vectors of the "
        "units extracted from its messages plus the context weight x that of the message "
        "before (each message embedded once; chunks without units embed their text); "
        "`embed`, its own text (title, date, preceding message and messages) embedded again.",
    )
    conversation_chunk_context_weight: float = Field(
        default=0.4,
        description="Under `units`, the weight of the message before in a chunk's vector.",
    )
    conversation_chunk_chars: int = Field(
        default=500, description="Characters of a chunk, its prefix included (maxChunkSize)."
    )
    conversation_chunk_overlap: int = Field(
        default=50,
        description="Overlap of the windows a long message is cut into (chunkOverlap).",
    )
    conversation_combine_short: bool = Field(
        default=True, description="Adjacent short messages share one chunk (combineShortMessages)."
    )
    conversation_short_message_chars: int = Field(
        default=100,
        description="Messages under this many characters are short (shortMessageThreshold).",
    )
    conversation_max_combined: int = Field(
        default=5, description="Short messages one chunk combines at most (maxCombinedMessages)."
    )
    conversation_roles: list[str] = Field(
        default_factory=lambda: ["user", "assistant"],
        description="Roles indexed, a JSON list; messages without a role always are "
        "(includeRoles).",
    )
    conversation_exclude_patterns: list[str] = Field(
        default_factory=list,
        description="Regular expressions, a JSON list, as PostgreSQL's `~` reads them "
        "(case-sensitive; `(?i)` first for not): a message whose text matches one is not "
        "indexed, nor quoted as the message before another's chunk (excludePatterns). Each "
        "is checked at start.",
    )
    conversation_include_title: bool = Field(
        default=True,
        description="A chunk's text starts with the conversation's title "
        "(includeConversationTitle).",
    )
    conversation_include_timestamp: bool = Field(
        default=True, description="A chunk's text carries its date (includeTimestamp)."
    )
    conversation_include_preceding: bool = Field(
        default=True,
        description="A chunk's text quotes the message before (includePrecedingContext).",
    )
    conversation_preceding_chars: int = Field(
        default=100, description="Characters of the message before that a chunk quotes."
    )
    conversation_min_score: float = Field(
        default=0.5, description="minScore of a search that gives none."
    )
    conversation_highlight: bool = Field(
        default=False, description="highlightMatches of a search that gives no `highlight`."
    )
    conversation_score_calibration: Literal["model", "off"] = Field(
        default="model",
        description="`model`: the score's distance is measured in the embedding model's own "
        "unit, so that 0.5 is the model's line between related and unrelated messages; "
        "`off`: the seed's 1 / (1 + L2) as it is.",
    )
    conversation_keyword_weight: float = Field(
        default=0.5, description="How far a keyword match lifts a chunk's score."
    )
    conversation_candidates: int = Field(
        default=50, description="Chunks each arm (vector, keyword) proposes."
    )
    conversation_keyword_budget: int = Field(
        default=1000, description="Matching chunks the keyword arm ranks at most."
    )
    conversation_reindex_batch: int = Field(
        default=500, description="Messages a rebuild of the index embeds per transaction."
    )
    conversation_consistency_interval_seconds: float = Field(
        default=3600.0,
        description="How often the consistency job checks (and repairs) the index; 0: not "
        "scheduled.",
    )
    conversation_auto_repair: bool = Field(
        default=True,
        description="The consistency job repairs what it finds (else it only reports it).",
    )

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

    @property
    def indexed_roles(self) -> list[str] | None:
        """The roles the conversation index covers; None when there is no index."""
        return self.conversation_roles if self.conversation_index else None
