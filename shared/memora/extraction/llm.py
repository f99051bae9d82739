"""The LLM extractor (seed 000 §2.2, seed 004 "Narrative Fact Extraction").

Each document is sent in chunks of at most `llm_chunk_chars` characters (an item longer than
that is split at paragraph, then sentence boundaries). For each chunk the model returns
narrative facts — self-contained, pronouns resolved, relative times made absolute — each with
its fact_type (world/agent), when it happened (occurred_start/end), the entities it names and
causal relations to other facts of the same answer. The answer is validated with pydantic and
re-asked when invalid (bounded, in `LLMClient.complete_json`).

What it stores: only these facts become memory units (item_index = the item they came from,
seq numbered per item across chunks, event_date = mentioned_at = the item's time). Raw turns
are not kept as units by this extractor; the raw items stay verbatim in `documents.items`.
Causal relations are kept within a chunk (`Fact.relations` → causal links in the links stage).
Each fact also carries the model's category, confidence, whether the user asked to remember it
and the sensitive category it reveals, if any (what the extract stage keeps: extraction.policy).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from memora.basics.config import Settings
from memora.basics.relations import canonical
from memora.extraction import completeness
from memora.extraction.base import CAUSAL_TYPES, Fact, Mention, Relation, SourceItem
from memora.extraction.policy import CATEGORIES, DEFAULT_CATEGORY
from memora.nlp.llm import LLMClient
from memora.nlp.temporal import period_range, resolve_expression

log = logging.getLogger("memora.extraction.llm")

ENTITY_TYPES = ("PERSON", "ORGANIZATION", "LOCATION", "PRODUCT", "CONCEPT", "OTHER")
_TYPE_ALIASES = {
    "ORG": "ORGANIZATION",
    "COMPANY": "ORGANIZATION",
    "PLACE": "LOCATION",
    "GPE": "LOCATION",
    "LOC": "LOCATION",
    "CITY": "LOCATION",
    "COUNTRY": "LOCATION",
    "PEOPLE": "PERSON",
    "TOOL": "PRODUCT",
    "TECHNOLOGY": "PRODUCT",
    "TOPIC": "CONCEPT",
    "EVENT": "CONCEPT",
}
MARKER = "You extract long-term memories"


# ------------------------------------------------------------------------ answer schema
class LLMEntity(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    type: str = "OTHER"

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> str:
        key = str(value or "OTHER").strip().upper()
        key = _TYPE_ALIASES.get(key, key)
        return key if key in ENTITY_TYPES else "OTHER"


class LLMRelation(BaseModel):
    target: int = Field(ge=0, description="0-based index of the other fact in `facts`")
    type: str = Field(description="one of causes, caused_by, enables, prevents")

    @field_validator("type", mode="before")
    @classmethod
    def _relation(cls, value: Any) -> str:
        key = str(value).strip().lower().replace(" ", "_").replace("-", "_")
        if key not in CAUSAL_TYPES:
            raise ValueError(f"relation type must be one of {', '.join(CAUSAL_TYPES)}")
        return key


class LLMEntityRelation(BaseModel):
    """A relation between two named entities the fact states (memora.basics.relations)."""

    subject: str = Field(min_length=1, max_length=200)
    relation: str
    object: str = Field(min_length=1, max_length=200)

    def named(self) -> tuple[str, str, str] | None:
        """(subject, relation, object) in the vocabulary's terms; None outside it."""
        found = canonical(self.relation)
        if found is None or self.subject.strip() == self.object.strip():
            return None
        relation, swap = found
        a, b = self.subject.strip(), self.object.strip()
        return (b, relation, a) if swap else (a, relation, b)


def _entity_relations(value: Any) -> list[LLMEntityRelation]:
    """The well-formed relations of the answer; any other entry is dropped, not the fact."""
    kept = []
    for entry in value if isinstance(value, list) else []:
        try:
            kept.append(LLMEntityRelation.model_validate(entry))
        except ValidationError:
            continue
    return kept


class LLMFact(BaseModel):
    item: int = Field(description="number of the item the fact comes from")
    text: str = Field(min_length=3)
    fact_type: str = Field(description='"world" or "agent"')
    occurred_start: str | None = None
    occurred_end: str | None = None
    entities: list[LLMEntity] = Field(default_factory=list)
    relations: list[LLMRelation] = Field(default_factory=list)
    entity_relations: list[LLMEntityRelation] = Field(default_factory=list)
    importance: float | None = Field(default=None, description="1 (mundane) to 10 (core)")
    category: str = Field(default=DEFAULT_CATEGORY, description=", ".join(CATEGORIES))
    confidence: float | None = Field(default=None, description="0 to 1")
    sensitive: str | None = Field(default=None, description="a sensitive category, or null")
    explicit: bool = Field(default=False, description="the user asked to remember it")

    @field_validator("entity_relations", mode="before")
    @classmethod
    def _tolerant(cls, value: Any) -> list[LLMEntityRelation]:
        return _entity_relations(value)

    @field_validator("category", mode="before")
    @classmethod
    def _category(cls, value: Any) -> str:
        key = str(value or "").strip().lower()
        return key if key in CATEGORIES else DEFAULT_CATEGORY

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> float | None:
        try:
            return None if value is None else min(1.0, max(0.0, float(value)))
        except (TypeError, ValueError):
            return None

    @field_validator("sensitive", mode="before")
    @classmethod
    def _sensitive(cls, value: Any) -> str | None:
        key = str(value or "").strip().lower()
        return None if key in ("", "none", "null", "false", "no") else key

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: Any) -> float | None:
        try:
            return None if value is None else min(10.0, max(1.0, float(value)))
        except (TypeError, ValueError):
            return None

    @field_validator("fact_type", mode="before")
    @classmethod
    def _fact_type(cls, value: Any) -> str:
        return "agent" if str(value).strip().lower() == "agent" else "world"


class ExtractionOutput(BaseModel):
    facts: list[LLMFact]


# ------------------------------------------------------------------------------- prompt
SYSTEM_PROMPT = """{marker} for the AI agent "{agent}" from conversations and documents.

Write NARRATIVE facts: each fact is a self-contained statement that keeps the who, what, why and
outcome of one topic together (a few sentences are fine when they belong together), not fragments.
Rules:
1. Resolve pronouns and references to the names they stand for ("she" -> "Alice").
2. Every fact is complete (subject and verb) and understandable without the conversation.
3. Skip greetings, small talk, filler and incomplete thoughts. No facts is a valid answer.
4. fact_type "agent": what the agent itself ("{agent}", the assistant) did, said, recommended or
   experienced, written in the first person ("I recommended Yosemite to Alice"). Everything else
   is "world".
5. Times: each item carries its timestamp; treat it as "now" for that item. Write absolute dates
   in the text instead of relative ones ("last year" -> "in 2023"). Set occurred_start and
   occurred_end (ISO 8601, e.g. "2023-06-01" or "2023-06") to when the event happened, or null.
6. entities: the people, organizations, locations, products and concepts the fact names, each
   with type PERSON, ORGANIZATION, LOCATION, PRODUCT, CONCEPT or OTHER.
7. relations: causal links to other facts of your answer, as {{"target": <0-based index of the
   other fact in "facts">, "type": "causes" | "caused_by" | "enables" | "prevents"}}.
8. item: the number of the item the fact comes from.
9. importance: how much the fact matters for knowing the person later, from 1 (mundane, e.g.
   small talk) to 10 (core: identity, relationships, major decisions and plans).
10. category: one of preference, fact, decision, relationship, project.
11. confidence: from 0 to 1, how certain you are that the fact is accurate as written.
12. explicit: true when the user explicitly asked to remember it ("remember that...").
13. entity_relations: relations the fact states as holding now between two NAMED entities, as
    {{"subject": name, "relation": one of works_at, lives_in, studies_at, member_of, manages,
    parent_of, sibling_of, partner_of, friend_of, colleague_of, "object": name}} ("manages":
    the manager is the subject; "parent_of": the parent). None for plans, the past, or people
    named only by their tie ("my sister").{sensitive}"""
SENSITIVE_RULE = """
14. sensitive: when the fact reveals {categories} information, that category's name, else
    null."""


@dataclass(frozen=True)
class Piece:
    item: SourceItem
    text: str
    part: int = 1
    parts: int = 1

    def render(self, label: str | None = None) -> str:
        label = (
            f"[{label}]"
            if label
            else f"[item {self.item.index}"
            + (f", part {self.part}/{self.parts}]" if self.parts > 1 else "]")
        )
        meta = [f"time: {self.item.event_date.isoformat()}"]
        if self.item.speaker:
            meta.append(f"speaker: {self.item.speaker}")
        if self.item.context:
            meta.append(f"context: {self.item.context}")
        return f"{label} {' | '.join(meta)}\n{self.text}"


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at paragraphs, then sentences, then anywhere."""
    if len(text) <= limit:
        return [text]
    for separator in (r"\n\s*\n", r"(?<=[.!?])\s+", r"\s+"):
        units = [u for u in re.split(separator, text) if u]
        if all(len(u) <= limit for u in units) and len(units) > 1:
            pieces: list[str] = []
            current = ""
            for unit in units:
                joined = f"{current} {unit}" if current else unit
                if len(joined) > limit and current:
                    pieces.append(current)
                    joined = unit
                current = joined
            return [*pieces, current] if current else pieces
    return [text[i : i + limit] for i in range(0, len(text), limit)]


def chunk_items(items: list[SourceItem], limit: int) -> list[list[Piece]]:
    """Consecutive items grouped into chunks of at most ~`limit` characters of content."""
    chunks: list[list[Piece]] = []
    current: list[Piece] = []
    size = 0
    for item in items:
        parts = split_text(item.content, limit)
        for number, text in enumerate(parts, start=1):
            piece = Piece(item, text, number, len(parts))
            if current and size + len(text) > limit:
                chunks.append(current)
                current, size = [], 0
            current.append(piece)
            size += len(text)
    if current:
        chunks.append(current)
    return chunks


# -------------------------------------------------------------------------------- times
_PARTIAL = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def parse_when(value: str | None, base: datetime) -> tuple[datetime, datetime] | None:
    """An ISO date/time, "YYYY" or "YYYY-MM", else a phrase dateparser understands."""
    if not value or not value.strip():
        return None
    value = value.strip()
    partial = _PARTIAL.match(value)
    if partial:
        year, month = int(partial.group(1)), int(partial.group(2) or 1)
        if not 1 <= month <= 12:
            return None
        start, end = period_range(datetime(year, month, 1), "month" if partial.group(2) else "year")
        return start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return resolve_expression(value, base)
    if len(value) <= 10:  # a date: the whole day
        start, end = period_range(parsed.replace(tzinfo=None), "day")
        return start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)
    moment = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return moment, moment


def occurred(fact: LLMFact, base: datetime) -> tuple[datetime | None, datetime | None]:
    start = parse_when(fact.occurred_start, base)
    end = parse_when(fact.occurred_end, base) or start
    if start is None and end is not None:
        start = end
    if start is None or end is None:
        return None, None
    if end[1] < start[0]:
        return start[0], start[1]
    return start[0], end[1]


# ---------------------------------------------------------------------------- extractor
class LLMExtractor:
    name = "llm"

    def __init__(self, client: LLMClient, settings: Settings) -> None:
        self.client = client
        self.chunk_chars = max(1000, settings.llm_chunk_chars)
        self.context_messages = settings.extraction_context_messages
        self.context_chars = settings.extraction_context_chars
        self.sensitive = list(settings.sensitive_categories)
        self.check_completeness = settings.extraction_completeness

    def extract(
        self, agent_id: str, items: list[SourceItem], preceding: Sequence[SourceItem] = ()
    ) -> list[Fact]:
        """One LLM call per chunk of items; each call also sees the messages just before its
        first item (an append's earlier messages, or the previous chunk's last ones), bounded
        by `extraction_context_messages` and `extraction_context_chars`, as context only: so
        pronouns resolve across appends while the prompt stays the size of what is new."""
        facts: list[Fact] = []
        seq_by_item: dict[int, int] = {}
        before = list(preceding)
        for chunk in chunk_items(items, self.chunk_chars):
            context = self.window(before)
            answer = self.client.complete_json(
                "extraction", self._messages(agent_id, chunk, context), ExtractionOutput
            )
            dropped = self._complete(answer, chunk)
            facts.extend(self._facts(answer, chunk, seq_by_item, dropped))
            # an item is context for the next chunk once its last part was extracted
            before += [piece.item for piece in chunk if piece.part == piece.parts]
        return facts

    def window(self, before: Sequence[SourceItem]) -> list[SourceItem]:
        """The last messages of `before` within the context bounds (oldest first)."""
        kept: list[SourceItem] = []
        size = 0
        for item in reversed(before[-self.context_messages :] if self.context_messages else []):
            size += len(item.content)
            if size > self.context_chars and kept:
                break
            kept.append(item)
        return kept[::-1]

    def _complete(self, answer: ExtractionOutput, chunk: list[Piece]) -> frozenset[int]:
        """Re-ask once for the facts that are not complete statements (extraction.completeness):
        their rewrites replace them; the positions of those the model dropped."""
        if not self.check_completeness or not answer.facts:
            return frozenset()
        flagged = completeness.incomplete([f.text for f in answer.facts])
        if not flagged:
            return frozenset()
        items = "\n\n".join(piece.render() for piece in chunk)
        repair = completeness.reask(self.client, {i: answer.facts[i].text for i in flagged}, items)
        for position, text in repair.rewritten.items():
            answer.facts[position].text = text
        return repair.dropped

    def system_prompt(self, agent_id: str) -> str:
        named = " or ".join(f'"{c}"' for c in self.sensitive)
        rule = SENSITIVE_RULE.format(categories=named) if self.sensitive else ""
        return SYSTEM_PROMPT.format(marker=MARKER, agent=agent_id, sensitive=rule)

    def _messages(
        self, agent_id: str, chunk: list[Piece], context: Sequence[SourceItem] = ()
    ) -> list[dict[str, str]]:
        body = "\n\n".join(piece.render() for piece in chunk)
        earlier = ""
        if context:
            lines = "\n\n".join(
                Piece(item, item.content[: self.context_chars]).render(label="earlier")
                for item in context
            )
            earlier = (
                "Earlier messages of this conversation, for context only (extract nothing from "
                f"them; they were processed before):\n\n{lines}\n\n"
            )
        return [
            {"role": "system", "content": self.system_prompt(agent_id)},
            {
                "role": "user",
                "content": f"{earlier}Extract the memories from these items:\n\n{body}",
            },
        ]

    def _facts(
        self,
        answer: ExtractionOutput,
        chunk: list[Piece],
        seq_by_item: dict[int, int],
        incomplete: frozenset[int] = frozenset(),
    ) -> list[Fact]:
        by_index = {piece.item.index: piece.item for piece in chunk}
        keys: list[tuple[int, int]] = []
        facts: list[Fact] = []
        for position, raw in enumerate(answer.facts):
            index = (
                raw.item if raw.item in by_index else min(by_index, key=lambda i: abs(i - raw.item))
            )
            item = by_index[index]
            seq = seq_by_item.get(index, 0)
            seq_by_item[index] = seq + 1
            keys.append((index, seq))
            start, end = occurred(raw, item.event_date)
            metadata = dict(item.metadata) | {"extractor": "llm"}
            if item.speaker:
                metadata["speaker"] = item.speaker
            mentions = list(
                dict.fromkeys(
                    Mention(e.name.strip(), e.type) for e in raw.entities if e.name.strip()
                )
            )
            facts.append(
                Fact(
                    item_index=index,
                    seq=seq,
                    text=raw.text.strip(),
                    fact_type=raw.fact_type,
                    event_date=item.event_date,
                    mentioned_at=item.event_date,
                    occurred_start=start,
                    occurred_end=end,
                    context=item.context,
                    metadata=metadata,
                    mentions=mentions,
                    importance=raw.importance,
                    category=raw.category,
                    confidence=raw.confidence,
                    sensitive=raw.sensitive,
                    explicit=raw.explicit,
                    incomplete=position in incomplete,
                    entity_relations=[n for r in raw.entity_relations if (n := r.named())],
                )
            )
        for position, (raw, fact) in enumerate(zip(answer.facts, facts, strict=True)):
            relations = {
                Relation(keys[r.target][0], keys[r.target][1], r.type)
                for r in raw.relations
                if r.target < len(keys) and r.target != position
            }
            fact.relations = sorted(
                relations, key=lambda r: (r.target_item, r.target_seq, r.relation)
            )
        return facts
