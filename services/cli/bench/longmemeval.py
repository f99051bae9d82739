"""LongMemEval files: a JSON list of instances, each a question with its own haystack of
sessions; here one agent per instance and one document per session.

Instance fields: `question_id` (ending in `_abs` for abstention questions, whose answer is not
in the haystack), `question_type`, `question`, `answer`, `question_date`,
`haystack_session_ids`, `haystack_dates`, `haystack_sessions` (lists of `{role, content,
has_answer?}` turns) and `answer_session_ids`. Dates read "2023/05/20 (Sat) 02:21".

Every turn is one memory, `speaker` its role, tagged `turn_id` = `<session id>_<n>` (n counts
the session's turns from 1, as LongMemEval's run_retrieval.py names them). The relevant turns
are the `has_answer` turns of the answer sessions; a question without any, and abstention
questions, get no retrieval figures (LongMemEval skips them too).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.cli.bench.dataset import Dataset, DatasetError, Question, Session

_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})")
ROLES = {"user", "assistant", "system", "tool"}


def parse_date(value: Any) -> datetime | None:
    match = _DATE.search(str(value or ""))
    if not match:
        return None
    year, month, day, hour, minute = (int(g) for g in match.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def _session(session_id: str, turns: list[dict[str, Any]], when: datetime | None) -> Session:
    items = []
    for n, turn in enumerate(turns, 1):
        role = str(turn.get("role") or "user")
        item: dict[str, Any] = {
            "content": str(turn["content"]),
            "speaker": role,
            "metadata": {"turn_id": f"{session_id}_{n}", "session_id": session_id},
        }
        if role in ROLES:
            item["role"] = role
        if when is not None:
            item["event_date"] = when.isoformat()
        items.append(item)
    return Session(session_id, items)


def _instance(raw: dict[str, Any], prefix: str) -> tuple[str, list[Session], Question]:
    qid = str(raw["question_id"])
    agent = f"{prefix}{qid}"
    answer_sessions = set(map(str, raw.get("answer_session_ids") or []))
    sessions, corpus, relevant = [], [], set()
    dates = raw.get("haystack_dates") or []
    for i, (sid, turns) in enumerate(zip(raw["haystack_session_ids"], raw["haystack_sessions"],
                                         strict=True)):  # fmt: skip
        session = _session(str(sid), turns, parse_date(dates[i]) if i < len(dates) else None)
        sessions.append(session)
        for turn, item in zip(turns, session.items, strict=True):
            corpus.append(item["metadata"]["turn_id"])
            if turn.get("has_answer") and (not answer_sessions or str(sid) in answer_sessions):
                relevant.add(item["metadata"]["turn_id"])
    abstention = qid.endswith("_abs")
    question = Question(
        id=qid,
        agent_id=agent,
        category="abstention" if abstention else str(raw.get("question_type") or "unknown"),
        question=str(raw["question"]),
        answer=str(raw.get("answer", "")),
        reference_time=parse_date(raw.get("question_date")),
        evidence=set() if abstention else relevant,
        corpus=corpus,
        abstention=abstention,
    )
    return agent, sessions, question


def load(path: Path, prefix: str, max_questions: int | None) -> Dataset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        instances = data[:max_questions] if max_questions else data
        built = [_instance(raw, prefix) for raw in instances]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DatasetError(f"{path} is not a LongMemEval file: {exc!r}") from exc
    return Dataset(
        "longmemeval",
        "turn_id",
        {agent: sessions for agent, sessions, _ in built},
        [question for _, _, question in built],
    )
