"""The extractor interface: raw items in, self-contained memory facts out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

CAUSAL_TYPES = ("causes", "caused_by", "enables", "prevents")


@dataclass(frozen=True)
class Mention:
    name: str
    entity_type: str


@dataclass(frozen=True)
class Relation:
    """A causal relation from this fact to another fact of the same document."""

    target_item: int
    target_seq: int
    relation: str


@dataclass
class Fact:
    item_index: int
    seq: int
    text: str
    fact_type: str
    event_date: datetime
    mentioned_at: datetime
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    context: str | None = None
    confidence: float | None = None  # 0–1: how sure the extractor is (docs/llm.md)
    metadata: dict[str, Any] = field(default_factory=dict)
    # None: let the entity stage run NER itself; a list (even empty): the extractor decided.
    mentions: list[Mention] | None = None
    relations: list[Relation] = field(default_factory=list)
    # between named entities, as the LLM read them: (subject, relation, object) names
    entity_relations: list[tuple[str, str, str]] = field(default_factory=list)
    importance: float | None = None  # 1–10; None: the extract stage's heuristic decides
    category: str | None = None  # memora.extraction.policy.CATEGORIES; None: guessed
    sensitive: str | None = None  # the sensitive category the extractor tagged, if any
    explicit: bool = False  # the user asked for it to be remembered
    incomplete: bool = False  # no subject or verb, and the LLM asked again dropped it


@dataclass(frozen=True)
class SourceItem:
    index: int
    content: str
    context: str | None
    event_date: datetime
    speaker: str | None
    metadata: dict[str, Any]


class Extractor(Protocol):
    name: str

    def extract(
        self, agent_id: str, items: list[SourceItem], preceding: Sequence[SourceItem] = ()
    ) -> list[Fact]:
        """Facts for the items (messages of one document); seq numbers are unique per item.
        `preceding`: the messages just before them, as context only (an append's window)."""
        ...
