"""Pre-seeding (seed 001 "gifted memories"): a scenario and its characters become memories.

Every character (an agent) receives, in the categories of seed 001:

    type "character":            identity, background (chunked at 300 characters, on sentence
                                 boundaries), communication, decision_style, traits, skills,
                                 values (network "agent": about the agent itself)
    type "scene":                location, atmosphere, time, context (network "world")
    type "character_knowledge":  the identity of every other character, `about` its name
    type "knowledge":            extra knowledge entries (with `about` when they name one)

Each lands in a document of its own agent, one per (scenario, section):
`seed:{scenario}:self:{category}`, `seed:{scenario}:scene`, `seed:{scenario}:about:{agent}`,
`seed:{scenario}:knowledge`. Documents are idempotent by content (memora.store.documents):
seeding the same file again changes nothing, and a changed character replaces only the
documents whose content changed (its own sections and the others' knowledge of it). Sections
that became empty are deleted. The memories are facts already: their operations are
"verbatim" (no extractor), then embedded, entity-linked and linked like every memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

from psycopg import Connection
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from memora.basics.models import AgentId, MemoryItem, StorableText
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.store import documents
from memora.usecases.ingest import Accepted, accept_batch, hand_off_accepted

CHUNK_CHARS = 300
SCENARIO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

Text = Annotated[StorableText, Field(max_length=10_000)]
Short = Annotated[StorableText, Field(min_length=1, max_length=200)]
ShortList = Annotated[list[Short], Field(max_length=100)]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, StringConstraints(pattern=SCENARIO_PATTERN)] = "main"
    location: Text | None = None
    atmosphere: Text | None = None
    time: Text | None = None
    description: Text | None = None


class Character(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    name: Short
    archetype: Text | None = None
    description: Text | None = None
    background: Text | None = None
    communication_style: Text | None = None
    decision_style: Text | None = None
    traits: ShortList = Field(default_factory=list)
    skills: ShortList = Field(default_factory=list)
    values: ShortList = Field(default_factory=list)


class Knowledge(BaseModel):
    """An extra fact a character knows (every character when `agent_id` is not given)."""

    model_config = ConfigDict(extra="forbid")

    content: Annotated[StorableText, Field(min_length=1, max_length=10_000)]
    agent_id: AgentId | None = None
    about: Short | None = None


class SeedFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenario: Scenario = Field(default_factory=Scenario)
    characters: Annotated[list[Character], Field(min_length=1, max_length=500)]
    knowledge: Annotated[list[Knowledge], Field(max_length=10_000)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> SeedFile:
        ids = [c.agent_id for c in self.characters]
        if len(set(ids)) != len(ids):
            raise ValueError("each character needs its own agent_id")
        unknown = {k.agent_id for k in self.knowledge if k.agent_id} - set(ids)
        if unknown:
            raise ValueError(f"knowledge names agents that are not characters: {sorted(unknown)}")
        return self


@dataclass(frozen=True)
class SeedDocument:
    agent_id: str
    document_id: str
    items: list[MemoryItem]  # empty: the section is gone (its document is deleted)


def chunk_text(text: str, max_chars: int = CHUNK_CHARS) -> list[str]:
    """Sentences gathered into chunks of at most `max_chars` (a longer sentence is one chunk)."""
    chunks: list[str] = []
    for sentence in _SENTENCE_END.split(" ".join(text.split())):
        if chunks and len(chunks[-1]) + 1 + len(sentence) <= max_chars:
            chunks[-1] = f"{chunks[-1]} {sentence}"
        elif sentence:
            chunks.append(sentence)
    return chunks


def _item(text: str, fact_type: str, **metadata: Any) -> MemoryItem:
    return MemoryItem(content=text, metadata={"fact_type": fact_type, **metadata})


def identity(c: Character) -> str:
    parts = [f"{c.name}" + (f", {c.archetype.strip()}" if c.archetype else "") + "."]
    if c.description:
        parts.append(c.description.strip())
    return " ".join(parts)


def _listing(label: str, values: list[str]) -> str:
    return f"{label}: {', '.join(v.strip() for v in values)}."


def character_sections(c: Character, scenario: str) -> dict[str, list[MemoryItem]]:
    """The character's own memories by category (seed 001 "Character Memory Seeding")."""

    def own(category: str, texts: list[str]) -> list[MemoryItem]:
        meta = {"type": "character", "category": category, "scenario": scenario}
        return [_item(t, "agent", **meta, character=c.name) for t in texts if t.strip()]

    return {
        "identity": own("identity", [f"You are {identity(c)}"]),
        "background": own("background", chunk_text(c.background or "")),
        "communication": own("communication", [c.communication_style or ""]),
        "decision_style": own("decision_style", [c.decision_style or ""]),
        "traits": own("traits", [_listing("Your traits", c.traits)] if c.traits else []),
        "skills": own("skills", [_listing("Your skills", c.skills)] if c.skills else []),
        "values": own("values", [_listing("You value", c.values)] if c.values else []),
    }


def scene_items(s: Scenario) -> list[MemoryItem]:
    parts = {
        "location": ("Location", s.location),
        "atmosphere": ("Atmosphere", s.atmosphere),
        "time": ("Time", s.time),
        "context": ("Situation", s.description),
    }
    return [
        _item(f"{label}: {value.strip()}", "world", type="scene", category=cat, scenario=s.id)
        for cat, (label, value) in parts.items()
        if value and value.strip()
    ]


def plan(seed: SeedFile) -> list[SeedDocument]:
    """Every document of every character, in a stable order."""
    sid = seed.scenario.id
    prefix = f"seed:{sid}"
    scene = scene_items(seed.scenario)
    docs: list[SeedDocument] = []
    for c in seed.characters:
        for section, items in character_sections(c, sid).items():
            docs.append(SeedDocument(c.agent_id, f"{prefix}:self:{section}", items))
        docs.append(SeedDocument(c.agent_id, f"{prefix}:scene", scene))
        for other in seed.characters:
            if other.agent_id != c.agent_id:
                knows = _item(
                    identity(other),
                    "world",
                    type="character_knowledge",
                    category="identity",
                    about=other.name,
                    about_agent=other.agent_id,
                    scenario=sid,
                )
                docs.append(SeedDocument(c.agent_id, f"{prefix}:about:{other.agent_id}", [knows]))
        extra = [
            _item(
                k.content,
                "world",
                type="character_knowledge" if k.about else "knowledge",
                scenario=sid,
                **({"about": k.about} if k.about else {}),
            )
            for k in seed.knowledge
            if k.agent_id in (None, c.agent_id)
        ]
        docs.append(SeedDocument(c.agent_id, f"{prefix}:knowledge", extra))
    return docs


@dataclass(frozen=True)
class Seeded:
    agent_id: str
    document_id: str
    status: str  # created, replaced, unchanged, deleted
    operation_id: UUID | None
    items: int


def apply(app: AppContext, conn: Connection[Any], scope: Scope, seed: SeedFile) -> list[Seeded]:
    """Store every document of the seed in one transaction (committed here), then hand those
    created or replaced to the pipeline."""
    out: list[Seeded] = []
    accepted: list[Accepted] = []
    with conn.transaction():
        for doc in plan(seed):
            if doc.items:
                a = accept_batch(
                    conn, scope, doc.agent_id, doc.items, doc.document_id, verbatim=True
                )
                accepted.append(a)
                out.append(
                    Seeded(doc.agent_id, doc.document_id, a.outcome, a.operation_id, len(doc.items))
                )
            elif documents.delete_document(conn, scope, doc.agent_id, doc.document_id):
                out.append(Seeded(doc.agent_id, doc.document_id, "deleted", None, 0))
    hand_off_accepted(app.backend, accepted)
    return out
