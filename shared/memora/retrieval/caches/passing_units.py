"""The units passing a search's filter, with their embeddings, kept in the query service's
memory (issue 29).

The semantic retriever ranks a filter that few enough units pass exactly: every passing unit's
distance to the query (`arms.exact.exact_scan`). Read from PostgreSQL on every search, that
costs one heap block a unit (a conversation's or a speaker's units lie all over the table) and
pgvector's half-precision distances; held here as one matrix of unit vectors, the same ranking
is one matrix-vector product (what each costs: docs/retrieval.md, "What the query service
holds"). Chat platforms search one conversation, one speaker or one period turn after turn,
so the same filter comes back.

Entries stay exact, as the mention signatures do (`caches.mentions`): each search
first reads the agent's rows passing the filter that were written at or after the snapshot
xmin of the entry's last read (`memory_vectors.written`, migration 0024: every transaction that
snapshot could not see has an id at least that), one index range, and in the same statement
whether the agent lost a vector, or had a filter column changed, since (`vector_removals`);
then the filter's units are read whole again, as they are on first use and after `ttl`.
Entries are immutable: a refresh builds a new one and puts it in place only if no other
refresh did meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

import numpy as np
from cachetools import TTLCache
from psycopg import Connection
from psycopg.rows import dict_row

from memora.basics import metrics
from memora.retrieval.caches.filter_holder import written_since
from memora.retrieval.filters import vector_scope
from memora.retrieval.types import SearchScope

HALFVEC_HEADER = 4  # pgvector's binary form of a halfvec: dimensions and an unused int16


@dataclass(frozen=True)
class Passing:
    """The units passing a filter: their ids (text), their embeddings as unit vectors (one row
    each, in the ids' order), every id as one comma-separated text and as a set (what the
    search's `Matching` takes), the xmin of the snapshot they were last read in, and when
    (`time.monotonic`) they were last read whole."""

    ids: tuple[str, ...]
    positions: dict[str, int]
    vectors: np.ndarray
    text: str
    members: frozenset[str]
    horizon: int
    whole_at: float  # when it was read whole, on its holder's clock

    @classmethod
    def read(
        cls, ids: Sequence[str], vectors: np.ndarray, horizon: int, whole_at: float
    ) -> Passing:
        ids = tuple(ids)
        index = {u: i for i, u in enumerate(ids)}
        return cls(ids, index, vectors, ",".join(ids), frozenset(ids), horizon, whole_at)

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes) + 250 * len(self.ids)  # an id: str, dict and set entries

    def nearest(self, query: np.ndarray, limit: int) -> list[tuple[UUID, float]]:
        """The `limit` units most similar to `query` by cosine similarity, most similar first,
        ties by id: what the exact scan's `ORDER BY distance, unit_id` gives (the query
        rounded to half precision as its `::halfvec` cast does)."""
        if not self.ids or limit <= 0:
            return []
        similarity = self.vectors @ unit_query(query)
        if limit < len(similarity):
            cut = similarity[np.argpartition(-similarity, limit - 1)[:limit]].min()
            rows = np.flatnonzero(similarity >= cut)  # the ties at the cut too
        else:
            rows = np.arange(len(similarity))
        best = sorted(rows.tolist(), key=lambda i: (-similarity[i], self.ids[i]))[:limit]
        return [(UUID(self.ids[i]), float(similarity[i])) for i in best]

    def merged(self, ids: Sequence[str], vectors: np.ndarray, horizon: int) -> Passing:
        """These units with `ids` (their unit vectors: `vectors`) added or, for an id already
        here, replaced, as read in a snapshot whose xmin was `horizon`."""
        if not ids:
            return replace(self, horizon=horizon)
        new = [i for i, u in enumerate(ids) if u not in self.positions]
        merged = self.vectors
        if len(new) < len(ids):  # some re-embedded: their rows replaced in a copy
            merged = merged.copy()
            for i, unit in enumerate(ids):
                if unit in self.positions:
                    merged[self.positions[unit]] = vectors[i]
        if not new:
            return replace(self, vectors=merged, horizon=horizon)
        added = tuple(ids[i] for i in new)
        return Passing(
            self.ids + added,
            self.positions | {u: len(self.ids) + i for i, u in enumerate(added)},
            np.concatenate([merged, vectors[new]]) if len(merged) else vectors[new],
            ",".join((self.text, *added)) if self.text else ",".join(added),
            self.members | frozenset(added),
            horizon,
            self.whole_at,
        )


def unit_query(query: np.ndarray) -> np.ndarray:
    """`query` rounded to half precision, as its `::halfvec` cast in SQL rounds it, and scaled
    to length 1: what held unit vectors are compared with."""
    rounded = np.asarray(query, dtype=np.float16).astype(np.float32)
    unit: np.ndarray = rounded / max(float(np.linalg.norm(rounded)), 1e-30)
    return unit


def unit_vectors(data: bytes, count: int) -> np.ndarray:
    """`count` halfvecs in pgvector's binary form, one after another (`halfvec_send`: two
    int16, then each dimension as a big-endian float16), as float32 rows scaled to length 1."""
    if not count:
        return np.zeros((0, 0), dtype=np.float32)
    raw = np.frombuffer(data, dtype=np.uint8).reshape(count, -1)[:, HALFVEC_HEADER:]
    rows = np.ascontiguousarray(raw).view(">f2").astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: np.ndarray = rows / np.maximum(norms, 1e-30)
    return unit


class PassingUnits:
    """The units passing the filters searches use, per (tenant, agent, fact types, filter), at
    most `max_bytes` in all (the least recently used go first), each entry read whole again
    after `ttl` seconds.

    A filter's units are held from its second search within `ttl` (`recurs`): a whole read
    costs two to three exact scans (the embeddings sent, not their distances), which a filter
    used once, such as a time window that moves with the clock, would pay for nothing."""

    def __init__(
        self, max_bytes: int, ttl: float, *, filters_noted: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._clock = clock  # what `ttl` is counted on (tests give their own)
        self._entries: TTLCache[tuple[Any, ...], Passing] = TTLCache(
            max(max_bytes, 1), ttl, timer=clock, getsizeof=lambda p: max(p.nbytes, 1)
        )
        # the filters searched lately and not held: True, to be held from their next search;
        # False, more units passed than may be ranked exactly
        self._noted: TTLCache[tuple[Any, ...], bool] = TTLCache(filters_noted, ttl, timer=clock)
        self._ttl = ttl  # the cache's own expiry restarts with each refresh: not a whole read
        self._lock = threading.Lock()
        self.reads = {"whole": 0, "changes": 0}  # how each filter's units were read, so far

    def footprint(self) -> tuple[int, int]:
        """Entries held and their bytes."""
        with self._lock:
            return len(self._entries), int(self._entries.currsize)

    def recurs(self, scope: SearchScope) -> bool:
        """Whether the scope's filter is held, or was searched before (and not found too broad
        to hold) within the ttl; notes this search of it."""
        key = scope.units_key
        with self._lock:
            if key in self._entries:
                return True
            before = self._noted.get(key)
            if before is None:
                self._noted[key] = True
        return before is True

    def count(self, scope: SearchScope) -> int | None:
        """How many units passed the scope's filter when last read (None: not held)."""
        with self._lock:
            held = self._entries.get(scope.units_key)
        return None if held is None else held.count

    def read(self, conn: Connection[Any], scope: SearchScope, at_most: int) -> Passing | None:
        """The units passing the scope's filter as they stand in `conn`'s snapshot, or None
        when more than `at_most` pass (then at most `at_most` + 1 rows were read)."""
        key = scope.units_key
        with self._lock:
            held = self._entries.get(key)
        found: Passing | None = None
        fresh = held is not None and self._clock() - held.whole_at <= self._ttl
        if held is not None and fresh and not written_since(conn, scope.agent_key, held.horizon):
            found = held  # nothing written or removed since its last read
        elif held is not None and fresh:
            horizon, removed, ids, vectors = _read(conn, scope, since=held.horizon)
            if not removed:
                found = held.merged(ids, vectors, horizon)
        whole = found is None
        if found is None:
            horizon, _, ids, vectors = _read(conn, scope, cap=at_most + 1)
            found = Passing.read(ids, vectors, horizon, self._clock())
        if fresh:
            metrics.FILTER_CACHE_READS.labels("changes").inc()
        if whole:
            metrics.FILTER_CACHE_READS.labels("whole").inc()
        with self._lock:
            self.reads["changes"] += fresh
            self.reads["whole"] += whole
            if found.count > at_most:
                self._noted[key] = False  # ranked exactly by the database, if at all
                self._entries.pop(key, None)
                return None
            if self._entries.get(key) is held:  # no other refresh came first
                with suppress(ValueError):  # larger than the whole cache: used, not kept
                    self._entries[key] = found
        return found


# One row: the xmin of the statement's snapshot, whether the agent lost a vector or had a
# filter column changed at or after `since` (when given), and the passing units' ids as one
# text and their embeddings as one bytea (both aggregates see the rows in the same order):
# every one (at most `cap`), or those written at or after `since` (an index range).
_READ = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 AS horizon, {removed} AS removed,
           count(*) AS n, coalesce(string_agg(m.unit_id::text, ','), '') AS ids,
           coalesce(string_agg(halfvec_send(m.embedding), ''::bytea), ''::bytea) AS vectors
    FROM (SELECT m.unit_id, m.embedding FROM memory_vectors m
          WHERE {scope} {where} {since}) AS m
"""
REMOVED_SINCE = (
    "EXISTS (SELECT 1 FROM vector_removals r "
    "WHERE r.agent_id = %(agent)s AND r.removed >= %(since)s)"
)


def read_passing(
    conn: Connection[Any], scope: SearchScope, template: str, *, since: int | None, cap: int,
    binary: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The one row of `template` (a statement over `memory_vectors m` with `{removed}`,
    `{scope}`, `{where}` and `{since}` to fill) for the units passing the scope's filter: at
    most `cap` of all (`since` None), or those written at or after `since`, with whether the
    agent lost a vector or had a filter column changed since."""
    where = scope.where
    statement = template.format(
        removed="false" if since is None else REMOVED_SINCE,
        scope=vector_scope("m"),
        where=where.sql,
        since="LIMIT %(cap)s" if since is None else "AND m.written >= %(since)s",
    )
    params = {**scope.params, **where.params, "since": since, "cap": cap}
    with conn.cursor(binary=binary, row_factory=dict_row) as cur:
        row = cur.execute(statement, params, prepare=where.prepare).fetchone()
    assert row is not None  # an aggregate: always one row
    return row


def _read(
    conn: Connection[Any], scope: SearchScope, *, since: int | None = None, cap: int = 0
) -> tuple[int, bool, list[str], np.ndarray]:
    """(the snapshot's xmin, whether a vector was removed since, ids, unit vectors) of the
    units passing the scope's filter: at most `cap` of all (`since` None), or those written
    at or after `since`."""
    row = read_passing(conn, scope, _READ, since=since, cap=cap, binary=True)
    count = int(row["n"])
    ids = row["ids"].split(",") if count else []
    return int(row["horizon"]), bool(row["removed"]), ids, unit_vectors(row["vectors"], count)
