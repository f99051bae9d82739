"""Validity windows on the read path (issue 26): what was true at a time.

Every memory holds from `valid_from`; a superseded one until `valid_until` (migration
0015_validity). A search sees history through a `Window`, [start, end):

- `as_of` (the request's): the facts true at that instant: active and superseded memories
  whose window contains it (valid_from ≤ as_of < valid_until), nothing learned later.
- a past period the query names ("in 2023", "last year"; `memora.nlp.temporal`), with no
  as_of: the default candidates, plus the superseded memories whose window overlaps the
  period, so a time-scoped question still finds the fact that was true then. Active memories
  are not narrowed to the period: a fact stated later about it (with no date the extractor
  could read) must stay findable.

Without a window nothing here runs: the default search's SQL is the same as before. With one,
superseded memories are few (a supersede per changed fact) and lie outside the tables the
retrievers read (`memory_vectors`, `memory_search`: active units only), so they come from one
more retriever, `history`: an exact ranking of the agent's superseded memories in the window by
cosine similarity (through `idx_memory_units_inactive`). Under as_of, the fused candidates are
checked against the window by primary key before hydration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from psycopg import Connection

from memora.nlp.temporal import QueryTimeRange
from memora.retrieval.types import SearchScope

INSTANT = timedelta(microseconds=1)  # as_of as a window: [as_of, as_of + 1 µs)
# the superseded memories a window may show: replaced facts (a merged restatement has no
# valid_until: its fact lives on in the memory that absorbed it)
SUPERSEDED = "{a}.status = 'superseded' AND {a}.valid_until IS NOT NULL"
OVERLAPS = "{a}.valid_from < %(w_end)s AND coalesce({a}.valid_until, 'infinity') > %(w_start)s"


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    source: Literal["as_of", "query"]  # the request's as_of, or a past period in the query

    @property
    def strict(self) -> bool:
        """Active memories must hold in it too (as_of); else only superseded ones are checked."""
        return self.source == "as_of"

    @property
    def params(self) -> dict[str, Any]:
        return {"w_start": self.start, "w_end": self.end}

    def describe(self) -> dict[str, Any]:
        """The trace's `as_of` entry."""
        return {"applied": True, "source": self.source, "start": self.start.isoformat(),
                "end": self.end.isoformat()}  # fmt: skip


NOT_APPLIED = {"applied": False, "source": None, "start": None, "end": None}


def window_of(
    as_of: datetime | None, time_range: QueryTimeRange | None, reference: datetime
) -> Window | None:
    """The search's window: its as_of, else the query's period when it began before
    `reference` (a future period has no history), else None."""
    if as_of is not None:
        return Window(as_of, as_of + INSTANT, "as_of")
    if time_range is not None and time_range.start < reference:
        return Window(time_range.start, min(time_range.end, reference), "query")
    return None


def status_where(alias: str, window: Window | None) -> str:
    """Which statuses hydration admits: active only without a window; with one, also the
    superseded memories in it, and under as_of only memories that held then."""
    active = f"{alias}.status = 'active'"
    if window is None:
        return active
    superseded = SUPERSEDED.format(a=alias)
    overlaps = OVERLAPS.format(a=alias)
    if window.strict:
        return f"({active} OR ({superseded})) AND {overlaps}"
    return f"({active} OR ({superseded} AND {overlaps}))"


def holding(
    conn: Connection[Any], scope: SearchScope, window: Window, ids: list[UUID]
) -> set[UUID]:
    """Those of `ids` hydration will admit under `window` (read by primary key): under as_of,
    the fused list is cut to its best candidates only after this check, so that memories
    learned later do not take their places."""
    rows = conn.execute(
        f"SELECT m.id FROM memory_units m WHERE m.id = ANY(%(ids)s) "
        f"AND m.agent_id = %(agent)s AND {status_where('m', window)}",
        {**scope.params, **window.params, "ids": ids},
    ).fetchall()
    return {r["id"] for r in rows}
