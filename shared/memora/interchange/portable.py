"""The export format (docs/operations.md "Export and import"): NDJSON, one JSON object a line.

    {"type": "header", "format": "memora-export", "version": 1, "agent_id": "alice" | null,
     "embedding_model": ..., "dimension": 384, "exported_at": ...}
    {"type": "profile", "agent_id": "alice", "personality": {...}, ...}   starts an agent
    {"type": "document" | "message" | "entity" | "memory" | "entity_relation" |
     "unit_entity" | "link" | "unit_source" | "access" | "history" | "chunk" | "index_state",
     <the row's columns>}
    ...                                   (a tenant-wide export: one profile section per agent)
    {"type": "end", "counts": {"profile": 1, "memory": 42, ...}}

`Reader` checks the structure line by line (the header first, every record after a profile,
nothing after the end, the end's counts matching) and validates each record's identifying
fields with the model of its type; any other column passes through as it came, for the
database to convert. Its errors name the line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, ValidationError

from memora.basics.errors import Refused
from memora.basics.models import AgentId

FORMAT = "memora-export"
VERSION = 1


class Header(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["header"]
    format: Literal["memora-export"]
    version: Literal[1]
    agent_id: AgentId | None  # None: a tenant-wide export
    embedding_model: str
    dimension: int
    exported_at: datetime


class End(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["end"]
    counts: dict[str, int]


class _Row(BaseModel):
    model_config = ConfigDict(extra="allow")


class Profile(_Row):
    agent_id: AgentId


class Identified(_Row):
    id: UUID


class Memory(Identified):
    text: str
    fact_type: str


class UnitEntity(_Row):
    unit_id: UUID
    entity_id: UUID


class Link(_Row):
    from_unit: UUID
    to_unit: UUID
    link_type: str


class UnitSource(_Row):
    unit_id: UUID
    message_pk: UUID


class Access(_Row):
    unit_id: UUID


class History(_Row):
    unit_id: UUID
    event: str
    at: datetime


class IndexState(_Row):
    embedding_model: str
    embedding_dim: int


RECORDS: dict[str, type[_Row]] = {
    "profile": Profile,
    "document": Identified,
    "message": Identified,
    "entity": Identified,
    "memory": Memory,
    "entity_relation": Identified,
    "unit_entity": UnitEntity,
    "link": Link,
    "unit_source": UnitSource,
    "access": Access,
    "history": History,
    "chunk": Identified,
    "index_state": IndexState,
}


class BadLine(Refused):
    """A line of the file that cannot be imported; `line` numbers from 1."""

    def __init__(self, line: int, problem: str, code: str = "invalid_import") -> None:
        super().__init__(code, f"line {line}: {problem}", {"line": line})
        self.line = line


class ConflictingLine(BadLine):
    """A line whose row this server holds for another agent or tenant (the same id)."""

    status = 409

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(line, problem, code="import_conflict")


@dataclass(frozen=True)
class Record:
    line: int
    kind: str
    agent_id: str  # the agent of the section it belongs to
    row: dict[str, Any]  # its columns as the file gave them ("type" removed)


def _problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _object(line: int, raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadLine(line, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise BadLine(line, "nested too deeply") from None
    if not isinstance(value, dict):
        raise BadLine(line, "not a JSON object")
    if not isinstance(value.get("type"), str):
        raise BadLine(line, 'no "type" field')
    return value


@dataclass
class Reader:
    """Reads an export line by line: `header` once the first line is read, then `records()`."""

    lines: Iterable[bytes | str]
    header: Header | None = None
    counts: Counter[str] = field(default_factory=Counter)

    def records(self) -> Iterator[Record]:
        agent: str | None = None
        number = 0
        ended = False
        for number, raw in enumerate(self.lines, start=1):
            if not raw.strip():
                continue
            if ended:
                raise BadLine(number, "content after the end record")
            value = _object(number, raw)
            kind = value["type"]
            if self.header is None:
                self.header = self._header(number, value)
            elif kind == "header":
                raise BadLine(number, "a second header")
            elif kind == "end":
                self._end(number, value)
                ended = True
            elif kind not in RECORDS:
                raise BadLine(number, f'unknown record type "{kind}"')
            else:
                self._validate(number, kind, value)
                if kind == "profile":
                    agent = self._start_agent(number, value["agent_id"])
                if agent is None:
                    raise BadLine(number, f"a {kind} record before any profile record")
                self.counts[kind] += 1
                row = {k: v for k, v in value.items() if k != "type"}
                yield Record(number, kind, agent, row)
        if self.header is None:
            raise BadLine(max(number, 1), "empty: no header")
        if not ended:
            raise BadLine(number, "truncated: no end record")

    def _header(self, line: int, value: dict[str, Any]) -> Header:
        if value["type"] != "header":
            raise BadLine(line, "the first line must be the header record")
        try:
            return Header.model_validate(value)
        except ValidationError as exc:
            raise BadLine(line, f"header: {_problem(exc)}") from None

    def _validate(self, line: int, kind: str, value: dict[str, Any]) -> None:
        try:
            RECORDS[kind].model_validate(value)
        except ValidationError as exc:
            raise BadLine(line, f"{kind}: {_problem(exc)}") from None

    def _start_agent(self, line: int, agent_id: str) -> str:
        assert self.header is not None
        if self.header.agent_id is not None and agent_id != self.header.agent_id:
            raise BadLine(line, f'profile of "{agent_id}" in an export of "{self.header.agent_id}"')
        if self.header.agent_id is not None and self.counts["profile"]:
            raise BadLine(line, "a second profile in a single agent's export")
        return agent_id

    def _end(self, line: int, value: dict[str, Any]) -> None:
        try:
            end = End.model_validate(value)
        except ValidationError as exc:
            raise BadLine(line, f"end: {_problem(exc)}") from None
        expected = {k: v for k, v in end.counts.items() if v}
        if expected != dict(self.counts):
            raise BadLine(
                line, f"the end record counts {expected}, the file holds {dict(self.counts)}"
            )
