"""Conversation archives: JSONL with one conversation per line, read lazily."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from memora.models import MemoryItem


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    agent_id: str
    items: list[MemoryItem]


def sample_archive() -> Path:
    return Path(str(resources.files("memora.data") / "sample_conversations.jsonl"))


def _message_item(message: dict[str, Any], default_time: str | None) -> MemoryItem:
    when = message.get("timestamp") or default_time
    return MemoryItem(
        content=message["text"],
        speaker=message.get("speaker"),
        event_date=datetime.fromisoformat(when) if when else None,
        metadata={k: v for k, v in message.get("metadata", {}).items()},
    )


def read_jsonl_conversations(path: Path, default_agent: str = "default") -> Iterator[Conversation]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            yield Conversation(
                conversation_id=record["conversation_id"],
                agent_id=record.get("agent_id", default_agent),
                items=[_message_item(m, record.get("started_at")) for m in record["messages"]],
            )
