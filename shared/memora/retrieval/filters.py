"""Metadata filters of a search, compiled once into a WHERE fragment every retriever shares.

The public form is flat, as a client or a model writes it:

    {"category": "identity",                 equality on a metadata key
     "speaker": ["Alice", "Bob"],            one of these values
     "turn": {"gte": 3, "lte": 10},          numeric range (gt, gte, lt, lte)
     "tags": {"any": ["a"], "all": ["b"]},   the unit's `tags` list holds any / all of these
     "time": {"start": ..., "end": ...}}     when it happened (occurred dates, else event date)

`tags` and `time` are reserved; every other key is a metadata key. Values reach SQL only as
bound parameters, keys inside bound jsonb documents; the fragment's text is made of fixed
pieces, the table alias (checked against an identifier pattern) and a range's key, written as
a literal so that an expression index can serve it (`_key_literal`). Equalities and tags
become jsonb containment (`metadata @> ...`), served by the GIN indexes over (agent_id,
metadata jsonb_path_ops) of `memory_vectors` and `memory_search` (migration 0012); ranges
compare `memora_number(metadata, 'key')` (a float8, NULL unless a JSON number), for `turn`
through the btree (agent_id, memora_number(metadata, 'turn')) indexes. Both are leakproof
(migration 0011), so the indexes serve them under row-level security too.

Beside the client's filters, `scope_where` / `vector_scope` are the conditions every retriever
applies (agent, fact types, active), and `Matching` is what one search learns of who passes.
A search compiles its filters once, into its `types.SearchScope`, which every retriever takes.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, TypeVar
from uuid import UUID

from psycopg.types.json import Jsonb
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from memora.basics.models import StorableText, aware

KEY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$"
MAX_KEYS = 16
MAX_VALUES = 100
_ALIAS = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_KEY = re.compile(KEY_PATTERN)

MetadataKey = Annotated[str, StringConstraints(pattern=KEY_PATTERN)]
Scalar = Annotated[StorableText, Field(max_length=500)] | int | float | bool
Tag = Annotated[StorableText, Field(min_length=1, max_length=200)]
Time = Annotated[datetime, AfterValidator(aware)]


class NumberRange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None

    @model_validator(mode="after")
    def _some_bound(self) -> NumberRange:
        if all(v is None for v in (self.gt, self.gte, self.lt, self.lte)):
            raise ValueError("a range needs at least one of gt, gte, lt, lte")
        return self

    def bounds(self) -> list[tuple[str, float]]:
        ops = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
        return [(op, v) for name, op in ops.items() if (v := getattr(self, name)) is not None]


class TagFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    any: Annotated[list[Tag], Field(min_length=1, max_length=MAX_VALUES)] | None = None
    all: Annotated[list[Tag], Field(min_length=1, max_length=MAX_VALUES)] | None = None


class TimeFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: Time | None = None  # inclusive
    end: Time | None = None  # exclusive

    @model_validator(mode="after")
    def _ordered(self) -> TimeFilter:
        if self.start is None and self.end is None:
            raise ValueError("a time filter needs start, end or both")
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError("time.start must be before time.end")
        return self


MetadataCondition = (
    Scalar | Annotated[list[Scalar], Field(min_length=1, max_length=MAX_VALUES)] | NumberRange
)


class Filters(BaseModel):
    """What a search may return, beyond its agent and fact types (see the module's doc)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"additionalProperties": True})

    metadata: Annotated[dict[MetadataKey, MetadataCondition], Field(max_length=MAX_KEYS)] = Field(
        default_factory=dict
    )
    tags: TagFilter | None = None
    time: TimeFilter | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        """Keys other than `tags` and `time` are metadata keys."""
        if isinstance(data, dict) and "metadata" not in data:
            reserved = {"tags", "time"}
            return {
                **{k: v for k, v in data.items() if k in reserved},
                "metadata": {k: v for k, v in data.items() if k not in reserved},
            }
        return data

    def is_empty(self) -> bool:
        return not self.metadata and self.tags is None and self.time is None

    def flat(self) -> dict[str, Any]:
        """The public form, as a client would send it."""
        out: dict[str, Any] = {
            k: v.model_dump(exclude_none=True) if isinstance(v, NumberRange) else v
            for k, v in self.metadata.items()
        }
        if self.tags is not None:
            out["tags"] = self.tags.model_dump(exclude_none=True)
        if self.time is not None:
            out["time"] = self.time.model_dump(mode="json", exclude_none=True)
        return out


@dataclass(frozen=True)
class Where:
    """` AND (...)` conditions (or nothing) and their parameters, named `f<n>`."""

    sql: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def prepare(self) -> bool | None:
        """`prepare` for psycopg's `execute`: a filtered query is planned for its own values
        every time. Prepared, its text (the same for `speaker: X` as for `type: Y`) would soon
        get one generic plan for all filters, blind to how many units each matches: a broad
        filter's search then took far longer (docs/retrieval.md, "Filters and
        fusion"). None: the default."""
        return False if self.sql else None


NO_FILTER = Where()


def compile_filters(filters: Filters | None, alias: str) -> Where:
    """The conditions on the rows of the table aliased `alias` (memory_vectors, memory_search
    or memory_units: all have metadata, event_date, occurred_start and occurred_end)."""
    if filters is None or filters.is_empty():
        return NO_FILTER
    if not _ALIAS.match(alias):
        raise ValueError(f"bad table alias {alias!r}")
    params: dict[str, Any] = {}

    def bind(value: Any) -> str:
        name = f"f{len(params)}"
        params[name] = value
        return f"%({name})s"

    meta = f"{alias}.metadata"
    conditions: list[str] = []
    equal = {k: v for k, v in filters.metadata.items() if not isinstance(v, list | NumberRange)}
    if equal:
        conditions.append(f"{meta} @> {bind(Jsonb(equal))}")
    for key, condition in filters.metadata.items():
        if isinstance(condition, list):
            conditions.append(_any_of(meta, [{key: v} for v in condition], bind))
        elif isinstance(condition, NumberRange):
            value = f"memora_number({meta}, {_key_literal(key)})"
            conditions.extend(f"{value} {op} {bind(v)}::float8" for op, v in condition.bounds())
    if filters.tags is not None:
        if filters.tags.all:
            conditions.append(f"{meta} @> {bind(Jsonb({'tags': filters.tags.all}))}")
        if filters.tags.any:
            conditions.append(_any_of(meta, [{"tags": [t]} for t in filters.tags.any], bind))
    if filters.time is not None:
        start = f"coalesce({bind(filters.time.start)}::timestamptz, '-infinity')"
        end = f"coalesce({bind(filters.time.end)}::timestamptz, 'infinity')"
        conditions.append(in_time_range(alias, start, end))
    return Where("".join(f" AND {c}" for c in conditions), params)


def in_time_range(alias: str, start: str, end: str) -> str:
    """The rows of `alias` that lie in [start, end) (SQL expressions): by when they happened
    (their occurred span overlaps it) or, with no occurred date, by when they were said. Each
    branch is served by its own indexes (migration 0013)."""
    return (
        f"(({alias}.occurred_start IS NULL AND {alias}.event_date >= {start}"
        f" AND {alias}.event_date < {end}) OR ({alias}.occurred_start IS NOT NULL"
        f" AND {alias}.occurred_start < {end}"
        f" AND coalesce({alias}.occurred_end, {alias}.occurred_start) >= {start}))"
    )


def _key_literal(key: str) -> str:
    """A range's key as a SQL literal, the one exception to "values are parameters": an
    expression index (`memora_number(metadata, 'turn')`, migration 0011) serves only a query
    that names the same constant. Safe because the key matches KEY_PATTERN (checked again
    here): letters, digits and `_.:-`, never a quote or a backslash."""
    if not _KEY.match(key):
        raise ValueError(f"bad metadata key {key!r}")
    return f"'{key}'"


def _any_of(meta: str, documents: list[dict[str, Any]], bind: Any) -> str:
    """One containment per alternative, OR-ed: each is served by the GIN index."""
    return "(" + " OR ".join(f"{meta} @> {bind(Jsonb(d))}" for d in documents) + ")"


def scope_where(alias: str, status: str | None = None) -> str:
    """The conditions every retriever puts on the units it returns (alias: the units' table),
    with its parameters from `types.SearchScope.params`: the agent, the requested fact types,
    embedded, active (memora.lifecycle: superseded, forgotten and archived memories are not
    searched; `status` replaces that condition for a search with a validity window:
    `validity.status_where`)."""
    status = status or f"{alias}.status = 'active'"
    return (
        f"{alias}.agent_id = %(agent)s AND {alias}.fact_type = ANY(%(types)s)"
        f" AND {alias}.embedding IS NOT NULL AND {status}"
    )


def id_array(param: str) -> str:
    """The uuid[] of parameter `param`'s comma-separated ids (one text: PostgreSQL parses it
    faster than a list is dumped id by id), parsed once per execution, as an InitPlan. Parsed
    in the expression itself, a plan that evaluates it again (a filter on each row, a nested
    loop's inner side) parses the whole text each time: on tables whose statistics lag their
    rows (a fresh database, an agent that grew since the last ANALYZE) the planner chose such
    plans, and one statement parsed the ids hundreds of times (docs/scaling.md)."""
    return f"(SELECT string_to_array(%({param})s, ',')::uuid[])::uuid[]"


def vector_scope(alias: str) -> str:
    """`scope_where` on `memory_vectors`, whose rows are the embedded active units."""
    return f"{alias}.agent_id = %(agent)s AND {alias}.fact_type = ANY(%(types)s)"


Row = TypeVar("Row", bound=tuple[Any, ...])


@dataclass(frozen=True)
class UnitSet:
    """Units by id, as text (the graph's and the mentions' ids) and as the ids' integers
    (`UUID.int`), so that rows read with UUIDs are checked without making each one's text
    (which costs more than the lookup itself)."""

    text: frozenset[str] = frozenset()
    numbers: frozenset[int] = frozenset()

    @classmethod
    def of(cls, ids: Iterable[str]) -> UnitSet:
        text = frozenset(ids)
        return cls(text, frozenset(UUID(u).int for u in text))

    def __len__(self) -> int:
        return len(self.text)

    def changed(self, added: Iterable[str], removed: Iterable[str]) -> UnitSet:
        """These units with `added` and without `removed` (ids as text)."""
        new, gone = UnitSet.of(added), UnitSet.of(removed)
        if not new and not gone:
            return self
        text = (self.text - gone.text) | new.text
        return UnitSet(text, (self.numbers - gone.numbers) | new.numbers)

    def outside(self, rows: Iterable[Row]) -> list[Row]:
        """The rows whose first column, a unit's UUID, is not one of these units."""
        numbers = self.numbers
        return [row for row in rows if row[0].int not in numbers]


# A filter that the planner expects half of the agent's units or more to pass is broad
# (`Matching.broad`). Narrower, most targets fail and a check per exploration would take
# many round trips (each failure hands its link on); checking every target in the links'
# query takes none.
BROAD_SHARE = 0.5


def broad_count(limit: int, share: float, failing: int | None = None) -> int:
    """How many of the unfiltered best to take for `limit` that pass a filter `share` of the
    units pass (at least BROAD_SHARE): a quarter more than that share should need. Where the
    units that fail it are known (`failing` of them; `share` then exact), `limit` and as many
    more as may fail among them: the failures expected at that share and three standard
    deviations over (as a Poisson count), and one; never more than `failing` (a filter one
    unit in a thousand fails: 2 more for 50, where a quarter more took 13). A reader that
    finds fewer pass reads further (`limit` + `failing` then suffices)."""
    share = max(share, BROAD_SHARE)
    count = math.ceil(1.25 * limit / share)
    if failing is None:
        return count
    expected = limit * (1 - share) / share
    margin = min(math.ceil(expected + 3 * math.sqrt(expected)) + 1, failing)
    return min(count, limit + margin)


@dataclass
class Matching:
    """Which of the agent's units pass a search's filters, as far as the search knows: all of
    them (`complete`, when the semantic retriever ranked the filter exactly), every unit that
    fails a broad one (`failing`, when the query service holds them: caches.failing_units),
    or the verdicts on those checked so far (`known`, kept over a broad filter's graph steps:
    see `arms.graph.passing`). Ids as text. The semantic retriever sets `planned` once its scan is
    planned (`share` then estimated, or left None for a filter few units pass; `failing` then
    known) and `settled` once its exact scan is done (`complete` then known, unless more
    passed than the plan expected), else as soon as the plan says there is none: the keyword
    and entity retrievers wait for them. (Retriever's executor has a worker for every task of
    every search it admits, so a wait never holds up the task it waits for.)"""

    complete: frozenset[str] | None = None
    known: dict[str, bool] = field(default_factory=dict)
    failing: UnitSet | None = None
    failing_since: int = 0  # the xmin of the snapshot `failing` was last brought up to date in
    share: float | None = None  # of the agent's units, by the planner's estimates
    planned: threading.Event = field(default_factory=threading.Event)
    settled: threading.Event = field(default_factory=threading.Event)
    complete_ids: str | None = None  # `complete` as the exact scan read it: comma-separated

    def know_all(self, ids: str, members: frozenset[str] | None = None) -> None:
        """Every unit that passes, comma-separated (`arms.exact.ExactScan.ids`), and as a set
        when already made."""
        if members is None:
            members = frozenset(ids.split(",")) if ids else frozenset()
        self.complete = members
        self.complete_ids = ids

    def listed(self, at_most: int) -> str | None:
        """Every unit that passes, comma-separated, when known and at most `at_most` pass."""
        if self.complete is None or len(self.complete) > at_most:
            return None
        return self.complete_ids

    @property
    def broad(self) -> bool:
        """Most units pass: the graph then checks a unit only as it comes up for exploration
        (memora.retrieval.activation's `admit`), not every target of every link it reads."""
        return self.complete is None and self.share is not None and self.share >= BROAD_SHARE
