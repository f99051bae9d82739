"""The export format's reader (memora.interchange.portable): structure, record validation, and
errors that name the line. No database: the rows pass through as the file gave them."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from memora.interchange.portable import BadLine, Reader

HEADER = {
    "type": "header",
    "format": "memora-export",
    "version": 1,
    "agent_id": "maya",
    "embedding_model": "all-MiniLM-L6-v2",
    "dimension": 384,
    "exported_at": "2026-11-26T05:00:00+00:00",
}
UNIT = str(uuid.uuid4())


def _file(*records: dict[str, Any], header: dict[str, Any] | None = None) -> list[str]:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["type"]] = counts.get(r["type"], 0) + 1
    end = {"type": "end", "counts": counts}
    return [json.dumps(x) + "\n" for x in (header or HEADER, *records, end)]


def _read(lines: list[str]) -> list[Any]:
    return list(Reader(lines).records())


def _error(lines: list[str]) -> str:
    with pytest.raises(BadLine) as caught:
        _read(lines)
    assert caught.value.details == {"line": caught.value.line}
    return caught.value.message


PROFILE = {"type": "profile", "agent_id": "maya", "background": "", "personality": {}}
MEMORY = {"type": "memory", "id": UNIT, "text": "Maya likes tea.", "fact_type": "world",
          "embedding": [0.1, 0.2], "valid_from": None}  # fmt: skip


def test_a_whole_file_yields_its_records_with_their_agent_and_line() -> None:
    lines = _file(PROFILE, MEMORY, {"type": "access", "unit_id": UNIT, "access_count": 2})
    records = _read(lines)
    assert [(r.line, r.kind, r.agent_id) for r in records] == [
        (2, "profile", "maya"),
        (3, "memory", "maya"),
        (4, "access", "maya"),
    ]
    # columns pass through untouched, unknown ones included; only "type" is taken off
    assert records[1].row == {k: v for k, v in MEMORY.items() if k != "type"}


def test_blank_lines_are_skipped_but_counted() -> None:
    lines = _file(PROFILE, MEMORY)
    lines.insert(2, "\n")
    assert [r.line for r in _read(lines)] == [2, 4]


def test_a_tenant_export_holds_one_section_per_agent() -> None:
    other = PROFILE | {"agent_id": "ravi"}
    lines = _file(PROFILE, MEMORY, other, MEMORY, header=HEADER | {"agent_id": None})
    assert [(r.kind, r.agent_id) for r in _read(lines)] == [
        ("profile", "maya"),
        ("memory", "maya"),
        ("profile", "ravi"),
        ("memory", "ravi"),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f[:-1], "line 3: truncated: no end record"),
        (lambda f: [*f[:2], f[2][:20]], "line 3: not valid JSON"),
        (lambda f: [*f[:2], '{"type": "gizmo"}\n', *f[2:]], 'line 3: unknown record type "gizmo"'),
        (lambda f: [*f[:2], "[1, 2]\n", *f[2:]], "line 3: not a JSON object"),
        (lambda f: [*f[:2], '{"id": 1}\n', *f[2:]], 'line 3: no "type" field'),
        (lambda f: f[1:], "line 1: the first line must be the header record"),
        (lambda f: [f[0], *f], "line 2: a second header"),
        (lambda f: [*f, f[1]], "line 5: content after the end record"),
        (lambda f: [f[0], f[2], f[1], f[3]], "line 2: a memory record before any profile record"),
        (lambda f: [*f[:3], f[2], f[3]], "line 5: the end record counts"),
        (lambda f: [], "line 1: empty: no header"),
        (lambda f: [*f[:2], "[" * 100_000 + "\n", *f[2:]], "line 3: nested too deeply"),
    ],
)
def test_structural_errors_name_the_line(change: Any, message: str) -> None:
    assert _error(change(_file(PROFILE, MEMORY))).startswith(message)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (MEMORY | {"id": "nope"}, "line 3: memory: id: Input should be a valid UUID"),
        ({k: v for k, v in MEMORY.items() if k != "text"}, "line 3: memory: text: Field required"),
        ({"type": "link", "from_unit": UNIT, "to_unit": UNIT}, "line 3: link: link_type:"),
        (
            {"type": "history", "unit_id": UNIT, "event": "added", "at": "yesterday"},
            "line 3: history: at:",
        ),
    ],
)
def test_records_are_validated_by_their_type(record: dict[str, Any], message: str) -> None:
    assert _error(_file(PROFILE, record)).startswith(message)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (HEADER | {"format": "other"}, "line 1: header: format:"),
        (HEADER | {"version": 2}, "line 1: header: version:"),
        (HEADER | {"agent_id": "a/b"}, "line 1: header: agent_id:"),
        ({k: v for k, v in HEADER.items() if k != "dimension"}, "line 1: header: dimension:"),
    ],
)
def test_the_header_is_checked(header: dict[str, Any], message: str) -> None:
    assert _error(_file(PROFILE, header=header)).startswith(message)


def test_a_single_agent_export_holds_that_agent_only() -> None:
    assert _error(_file(PROFILE | {"agent_id": "ravi"})).startswith(
        'line 2: profile of "ravi" in an export of "maya"'
    )
    assert _error(_file(PROFILE, PROFILE)).startswith(
        "line 3: a second profile in a single agent's export"
    )
