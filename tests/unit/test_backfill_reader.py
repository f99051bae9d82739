"""Archive streaming for `memora backfill`: formats, grouping, ids, resume positions, memory."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from memora.interchange.archives import (
    Checkpoint,
    Position,
    detect_format,
    fingerprint,
    read_documents,
    sample_archive,
)

LOCOMO_DEV = Path(__file__).resolve().parents[3] / "shared" / "locomo" / "locomo_dev.json"


def _write_lines(path: Path, records: list[Any]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(record if isinstance(record, str) else json.dumps(record))
            handle.write("\n")
    return path


def _message(conv: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"conversation_id": conv, "speaker": "Ana", "text": text, **extra}


def _mixed_archive(path: Path) -> Path:
    """Both JSONL shapes, blank and broken lines, a conversation that comes back later, and a
    conversation line longer than max_items (3)."""
    return _write_lines(
        path,
        [
            _message("a", "one", timestamp="2024-01-01T10:00:00Z"),
            _message("a", "two"),
            "",
            _message("a", "three"),
            _message("a", "four"),
            "{not json",
            _message("b", "five", agent_id="other"),
            {
                "conversation_id": "c",
                "messages": [{"speaker": "Bo", "text": f"m{i}"} for i in range(7)],
            },
            _message("a", "six"),
            _message("a", "   "),  # blank content: skipped, reported
            _message("a", "seven"),
        ],
    )


def test_conversation_lines_give_one_document_per_conversation() -> None:
    docs = list(read_documents(sample_archive(), "jsonl"))
    assert [d.document_id for d in docs] == [f"maya-session-{i}" for i in range(1, 7)]
    assert all(d.agent_id == "maya-assistant" and len(d.items) == 5 for d in docs)
    first = docs[0].items[0]
    assert first.speaker == "Maya" and first.event_date is not None  # from started_at


def test_messages_are_grouped_by_consecutive_conversation(tmp_path: Path) -> None:
    problems: list[tuple[int, str]] = []
    docs = list(
        read_documents(
            _mixed_archive(tmp_path / "a.jsonl"),
            "jsonl",
            max_items=3,
            on_problem=lambda line, reason: problems.append((line, reason)),
        )
    )
    assert [(d.document_id, d.agent_id, len(d.items)) for d in docs] == [
        ("a#L1", "default", 3),
        ("a#L5", "default", 1),
        ("b#L7", "other", 1),
        ("c", "default", 3),
        ("c#2", "default", 3),
        ("c#3", "default", 1),
        ("a#L9", "default", 2),
    ]
    assert [line for line, _ in problems] == [6, 10]
    assert docs[0].items[0].event_date is not None and docs[0].items[1].event_date is None


def test_agent_override(tmp_path: Path) -> None:
    docs = list(read_documents(_mixed_archive(tmp_path / "a.jsonl"), "jsonl", default_agent="x"))
    assert {d.agent_id for d in docs} == {"x"}


def test_resuming_after_any_document_yields_exactly_the_rest(tmp_path: Path) -> None:
    path = _mixed_archive(tmp_path / "a.jsonl")
    docs = list(read_documents(path, "jsonl", max_items=3))
    for k, doc in enumerate(docs):
        problems: list[int] = []

        def report(line: int, _reason: str, seen: list[int] = problems) -> None:
            seen.append(line)

        rest = list(
            read_documents(path, "jsonl", max_items=3, resume=doc.resume, on_problem=report)
        )
        assert [d.document_id for d in rest] == [d.document_id for d in docs[k + 1 :]]
        assert [d.resume.index for d in rest] == [d.resume.index for d in docs[k + 1 :]]
        # problems before the resume point are not reported twice
        assert all(line > doc.resume.line for line in problems)


def test_metadata_values_are_kept_scalar(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "m.jsonl", [_message("a", "hi", metadata={"n": 1, "tags": ["x", "y"]})]
    )
    (doc,) = read_documents(path, "jsonl")
    assert doc.items[0].metadata == {"n": 1, "tags": '["x", "y"]'}


def _locomo_like(path: Path, conversations: int, sessions: int, turns: int) -> Path:
    data = []
    for c in range(conversations):
        conv: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
        for s in range(1, sessions + 1):
            conv[f"session_{s}_date_time"] = f"1:56 pm on {s} May, 2023"
            conv[f"session_{s}"] = [
                {
                    "speaker": "Ana" if t % 2 else "Ben",
                    "dia_id": f"D{s}:{t + 1}",
                    "text": f"turn {t} of session {s}",
                    **({"blip_caption": "a photo of a dog"} if t == 0 else {}),
                }
                for t in range(turns)
            ]
        data.append(
            {
                "qa": [{"question": "q", "answer": "a"}],
                "conversation": conv,
                "event_summary": {},
                "sample_id": f"conv-{c}",
            }
        )
    path.write_text(json.dumps(data))
    return path


def test_locomo_sessions_become_documents(tmp_path: Path) -> None:
    path = _locomo_like(tmp_path / "l.json", conversations=2, sessions=3, turns=4)
    assert detect_format(path) == "locomo"
    docs = list(read_documents(path, "locomo"))
    assert [d.document_id for d in docs] == [
        f"conv-{c}:session_{s}" for c in range(2) for s in range(1, 4)
    ]
    assert {d.agent_id for d in docs} == {"conv-0", "conv-1"}
    first = docs[0].items[0]
    assert first.content.endswith("[shares image: a photo of a dog]")
    assert first.metadata == {"dia_id": "D1:1"}
    assert first.event_date is not None and first.event_date.day == 1
    rest = list(read_documents(path, "locomo", resume=docs[3].resume))
    assert [d.document_id for d in rest] == [d.document_id for d in docs[4:]]


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="LoCoMo dev split not beside the repository")
def test_locomo_dev_split() -> None:
    docs = list(read_documents(LOCOMO_DEV, "locomo"))
    assert {d.agent_id for d in docs} == {"conv-26", "conv-30"}
    assert sum(len(d.items) for d in docs) > 600


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format(sample_archive()) == "jsonl"
    (tmp_path / "x.json").write_text("\n\n  [ ]")
    assert detect_format(tmp_path / "x.json") == "locomo"


def test_checkpoint_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "cp" / "c.json"
    cp = Checkpoint("src", "jsonl", fingerprint(sample_archive()), 10, Position(5, 2, 1, 3))
    cp.outcomes["created"] = 3
    cp.save(path)
    loaded = Checkpoint.load(path)
    assert loaded is not None and loaded.resume == Position(5, 2, 1, 3)
    assert loaded.outcomes == {"created": 3} and loaded.updated_at
    assert list(path.parent.iterdir()) == [path]  # no temporary file left


def test_reading_keeps_memory_flat(tmp_path: Path) -> None:
    """Peak Python allocations while streaming do not grow with the archive."""

    def peak(lines: int) -> int:
        path = _write_lines(
            tmp_path / f"{lines}.jsonl",
            [_message(f"c{i // 20}", f"message number {i} " + "x" * 100) for i in range(lines)],
        )
        tracemalloc.start()
        count = sum(len(d.items) for d in read_documents(path, "jsonl"))
        _, high = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert count == lines
        return high

    small, large = peak(1_000), peak(10_000)
    assert large < small * 1.5 + 200_000, (small, large)
