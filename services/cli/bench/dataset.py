"""What a benchmark file becomes: the sessions to ingest per agent and the questions to ask."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class Session:
    document_id: str
    items: list[dict[str, Any]]  # MemoryItem fields; metadata names the turn (evidence key)


@dataclass
class Question:
    id: str
    agent_id: str
    category: str
    question: str
    answer: str
    reference_time: datetime | None = None  # when the question is asked
    evidence: set[str] = field(default_factory=set)  # ids of the turns that hold the answer
    corpus: list[str] = field(default_factory=list)  # every turn id of the haystack
    abstention: bool = False  # the answer is not in the memories: "I don't know" is right


@dataclass
class Dataset:
    benchmark: str  # "locomo" | "longmemeval"
    evidence_key: str  # the metadata key of a memory that names its turn
    sessions: dict[str, list[Session]]  # agent id → its sessions, in order
    questions: list[Question]


class DatasetError(ValueError):
    """The file is not in the benchmark's format."""
