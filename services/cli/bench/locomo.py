"""LoCoMo files: one agent per conversation, one document per session (the backfill reader),
memories tagged with their turn's `dia_id`; questions of categories 1–4.

Evidence strings are normalised as in bench/locomo.py ('D8:6; D9:17', 'D:11:26', 'D30:05').
The reference time of a question is the conversation's last session: when it is asked.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memora.interchange.archives import LOCOMO_TIME, read_documents
from services.cli.bench.dataset import Dataset, DatasetError, Question, Session

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def evidence_ids(evidence: list[Any]) -> set[str]:
    return {f"D{int(a)}:{int(b)}" for e in evidence for a, b in _EVIDENCE.findall(str(e))}


def _last_session_time(conversation: dict[str, Any]) -> datetime | None:
    times = []
    for key, value in conversation.items():
        if key.endswith("_date_time") and isinstance(value, str):
            try:
                times.append(datetime.strptime(value.strip(), LOCOMO_TIME).replace(tzinfo=UTC))
            except ValueError:
                continue
    return max(times, default=None)


def load(
    path: Path, prefix: str, max_conversations: int | None, max_questions: int | None
) -> Dataset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        conversations = data[:max_conversations] if max_conversations else data
        chosen = {str(c["sample_id"]) for c in conversations}
    except (ValueError, TypeError, KeyError) as exc:
        raise DatasetError(f"{path} is not a LoCoMo file (a list of conversations): {exc}") from exc
    sessions: dict[str, list[Session]] = {f"{prefix}{s}": [] for s in chosen}
    for doc in read_documents(path, "locomo"):
        if doc.agent_id in chosen:
            items = [i.model_dump(mode="json", exclude_none=True) for i in doc.items]
            sessions[f"{prefix}{doc.agent_id}"].append(Session(doc.document_id, items))
    questions = []
    for conv in conversations:
        sample = str(conv["sample_id"])
        asked = _last_session_time(conv.get("conversation") or {})
        qa = [q for q in conv.get("qa") or [] if q.get("category") in CATEGORIES]
        for n, q in enumerate(qa[:max_questions] if max_questions else qa, 1):
            questions.append(
                Question(
                    id=f"{sample}:q{n}",
                    agent_id=f"{prefix}{sample}",
                    category=CATEGORIES[q["category"]],
                    question=str(q["question"]),
                    answer=str(q.get("answer", "")),
                    reference_time=asked,
                    evidence=evidence_ids(q.get("evidence") or []),
                )
            )
    return Dataset("locomo", "dia_id", sessions, questions)
