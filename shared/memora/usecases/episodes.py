"""Episodic capture (seed 001): what was said in a scene, remembered by every listener.

A line of dialogue becomes `"{speaker} said: {text}"`, an episodic dialogue memory
(metadata: type "episodic", category "dialogue", scene, turn, speaker) in each listener's
memory, through the normal pipeline (verbatim: the line is the fact). Each listener's copy is
the document `episode:{scene}:{turn}:{speaker}`, so re-sending a turn changes nothing and a
corrected text replaces the earlier one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from psycopg import Connection
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from memora.basics.models import AgentId, MemoryItem, StorableText, aware
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.usecases.ingest import Accepted, accept_batch, hand_off_accepted
from memora.usecases.seeding import SCENARIO_PATTERN


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or whitespace")
    return value


class Episode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scene: Annotated[str, StringConstraints(pattern=SCENARIO_PATTERN)] = Field(
        description="the scene or simulation the line was said in"
    )
    turn: Annotated[int, Field(ge=0, le=1_000_000_000)]
    speaker: Annotated[StorableText, Field(min_length=1, max_length=100)]
    text: Annotated[StorableText, Field(min_length=1, max_length=20_000)]
    listeners: Annotated[list[AgentId], Field(min_length=1, max_length=500)]
    event_date: Annotated[datetime | None, AfterValidator(aware)] = None

    @field_validator("speaker", "text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return _not_blank(value)

    @field_validator("listeners")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @property
    def document_id(self) -> str:
        return f"episode:{self.scene}:{self.turn}:{self.speaker}"

    def item(self) -> MemoryItem:
        return MemoryItem(
            content=f"{self.speaker} said: {self.text}",
            event_date=self.event_date,
            metadata={
                "fact_type": "agent",  # what the agent lived through
                "type": "episodic",
                "category": "dialogue",
                "scene": self.scene,
                "turn": self.turn,
                "speaker": self.speaker,
            },
        )


# The most lines a batch may carry, and documents (lines × listeners) it may write at once.
MAX_LINES = 200
MAX_DOCUMENTS = 5_000


class Line(BaseModel):
    """One line of a batch: its own turn, speaker, text and date."""

    model_config = ConfigDict(extra="forbid")

    turn: Annotated[int, Field(ge=0, le=1_000_000_000)]
    speaker: Annotated[StorableText, Field(min_length=1, max_length=100)]
    text: Annotated[StorableText, Field(min_length=1, max_length=20_000)]
    event_date: Annotated[datetime | None, AfterValidator(aware)] = None

    @field_validator("speaker", "text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return _not_blank(value)


class EpisodeBatch(BaseModel):
    """Several lines of one scene heard by the same listeners (`POST /api/episodes/batch`)."""

    model_config = ConfigDict(extra="forbid")

    scene: Annotated[str, StringConstraints(pattern=SCENARIO_PATTERN)] = Field(
        description="the scene or simulation the lines were said in"
    )
    listeners: Annotated[list[AgentId], Field(min_length=1, max_length=500)]
    lines: Annotated[list[Line], Field(min_length=1, max_length=MAX_LINES)]

    @model_validator(mode="after")
    def _bounded(self) -> EpisodeBatch:
        keys = [(line.turn, line.speaker) for line in self.lines]
        if len(set(keys)) != len(keys):
            turn, speaker = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"turn {turn} of {speaker!r} appears twice in the batch")
        listeners = len(dict.fromkeys(self.listeners))
        if len(self.lines) * listeners > MAX_DOCUMENTS:
            raise ValueError(
                f"{len(self.lines)} lines × {listeners} listeners is more than "
                f"{MAX_DOCUMENTS} memories in one request: send fewer lines at a time"
            )
        return self

    def episodes(self) -> list[Episode]:
        """Each line as the episode `POST /api/episodes` takes (its checks applied)."""
        return [
            Episode(scene=self.scene, listeners=self.listeners, **line.model_dump())
            for line in self.lines
        ]


def capture(
    app: AppContext, conn: Connection[Any], scope: Scope, episode: Episode
) -> list[Accepted]:
    """One document per listener, all in one transaction (committed here), then handed to
    the pipeline."""
    return capture_many(app, conn, scope, [episode])[0]


def capture_many(
    app: AppContext, conn: Connection[Any], scope: Scope, lines: list[Episode]
) -> list[list[Accepted]]:
    """Every line's documents (one per listener) in one transaction: all of them or none;
    then handed to the pipeline. Each line's accepted documents, in the listeners' order."""
    with conn.transaction():
        accepted = [
            [
                accept_batch(conn, scope, listener, [episode.item()], episode.document_id,
                             verbatim=True)
                for listener in episode.listeners
            ]
            for episode in lines
        ]  # fmt: skip
    hand_off_accepted(app.backend, [a for line in accepted for a in line])
    return accepted
