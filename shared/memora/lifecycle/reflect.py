"""reflect's prompt and answer (seed 002 §4.4.4; Generative Agents' reflection): the numbered
memories in, at most 2 ("shallow") or 5 ("deep") insights out, each with the memories it rests
on. The use case that reads the sources and stores the insights is memora.usecases.reflect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol
from uuid import UUID

from pydantic import BaseModel, Field

from memora.nlp.llm import LLMClient

REFLECT_MARKER = "You reflect on an AI agent's memories"
Depth = Literal["shallow", "deep"]


class Source(Protocol):
    """A memory reflect reads: the store's units, neighbours and recent memories."""

    @property
    def id(self) -> UUID: ...
    @property
    def text(self) -> str: ...
    @property
    def event_date(self) -> datetime: ...


class Insight(BaseModel):
    text: str = Field(min_length=3, max_length=2000)
    sources: list[int] = Field(min_length=1, description="numbers of the memories it rests on")
    importance: float = Field(default=6, ge=1, le=10)


class _Reflection(BaseModel):
    insights: list[Insight] = Field(max_length=10)


@dataclass(frozen=True)
class Reflection:
    id: UUID
    text: str
    importance: float
    sources: list[UUID]


def most_insights(depth: Depth) -> int:
    return 5 if depth == "deep" else 2


def insights(
    llm: LLMClient, sources: Sequence[Source], topic: str | None, depth: Depth
) -> list[tuple[Insight, list[UUID]]]:
    """The LLM's insights on `sources`, each with the ids of the sources it names (insights
    naming none are dropped)."""
    listing = "\n".join(
        f"{i}. [{r.event_date:%Y-%m-%d}] {r.text}" for i, r in enumerate(sources, 1)
    )
    most = most_insights(depth)
    focus = f" about {topic}" if topic else ""
    answer = llm.complete_json(
        "background",
        [
            {
                "role": "system",
                "content": f"{REFLECT_MARKER}. From the numbered memories, write at most {most} "
                "high-level insights (patterns, preferences, lasting conclusions) that no single "
                "memory states, each with the numbers of the memories it rests on and an "
                "importance from 1 (trivial) to 10 (core to who the person is).",
            },
            {"role": "user", "content": f"Memories{focus}:\n{listing}"},
        ],
        _Reflection,
    )
    found = [
        (i, [sources[n - 1].id for n in dict.fromkeys(i.sources) if 1 <= n <= len(sources)])
        for i in answer.insights[:most]
    ]
    return [(i, ids) for i, ids in found if ids]
