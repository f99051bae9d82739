"""recall's query (seed 002 §4.4.3); the use case is memora.usecases.recall."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

REFLECTION = "reflection"


@dataclass(frozen=True)
class RecallQuery:
    query: str
    limit: int = 10
    start: datetime | None = None
    end: datetime | None = None
    categories: tuple[str, ...] | None = None
    include_reflections: bool = True
    as_of: datetime | None = None  # what was true then (memora.retrieval.validity)
