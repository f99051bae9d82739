"""Plain data shared by the API, the CLI and the pipeline."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
DOCUMENT_ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,256}$"
FACT_TYPES = ("world", "agent", "opinion")

AgentId = Annotated[str, StringConstraints(pattern=AGENT_ID_PATTERN)]
DocumentId = Annotated[str, StringConstraints(pattern=DOCUMENT_ID_PATTERN)]


def _aware(value: datetime | None) -> datetime | None:
    """Naive timestamps are taken as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or whitespace")
    return value


class MemoryItem(BaseModel):
    """One piece of raw content: a message, a turn, or a whole transcript."""

    model_config = ConfigDict(extra="forbid")

    content: Annotated[str, AfterValidator(_not_blank)]
    context: str | None = Field(default=None, max_length=2000)
    event_date: Annotated[datetime | None, AfterValidator(_aware)] = None
    speaker: str | None = Field(default=None, max_length=200)
    metadata: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


def is_valid_agent_id(agent_id: str) -> bool:
    return re.fullmatch(AGENT_ID_PATTERN, agent_id) is not None


def utcnow() -> datetime:
    return datetime.now(UTC)


def jsonable_items(items: list[MemoryItem]) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json") for item in items]
