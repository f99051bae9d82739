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
)

from memora.basics.models import AgentId, MemoryItem, StorableText, aware
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.usecases.ingest import Accepted, accept_batch, hand_off_accepted
from memora.usecases.seeding import SCENARIO_PATTERN


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
        if not value.strip():
            raise ValueError("must not be empty or whitespace")
        return value

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


def capture(
    app: AppContext, conn: Connection[Any], scope: Scope, episode: Episode
) -> list[Accepted]:
    """One document per listener, all in one transaction (committed here), then handed to
    the pipeline."""
    item = episode.item()
    with conn.transaction():
        accepted = [
            accept_batch(conn, scope, listener, [item], episode.document_id, verbatim=True)
            for listener in episode.listeners
        ]
    hand_off_accepted(app.backend, accepted)
    return accepted
