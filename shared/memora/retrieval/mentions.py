"""The named entities' mention signatures, kept in the query service's memory (issue 29).

The entity retriever ranks an entity's mentions by the Hamming distance between their
signatures (`unit_entities.signature`, migration 0021: one bit a dimension of the unit's
embedding) and the query's, then compares the best of them with the full embeddings. Read
from PostgreSQL on every search, a main character's signatures cost ~8 ms of database time at
100k memories (5,000 mentions) and ~25 ms at 1M (57,000); held here as packed 64-bit words,
the same ranking is a popcount over an array (numpy: ~0.2 ms and ~2 ms).

They stay exact. Each search first reads what was written since the entity's signatures
were last read: the rows written at or after that read's snapshot xmin
(`unit_entities.written`, migration 0023: every transaction that snapshot could not see has
an id at least that), one index range. In the same statement it learns whether the entity
lost a mention since (`entities.mentions_removed`, set by the triggers of 0023 when a row is
deleted or moved); then the entity's mentions are read whole again, as they are when it is
first named and after `ttl`. Entries are immutable: a refresh builds a new one and puts it
in place only if no other refresh did meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from cachetools import TTLCache
from psycopg import Connection, sql
from psycopg.rows import tuple_row

VARBIT_HEADER = 4  # PostgreSQL's binary form of a bit string: its length (int4), then the bits


@dataclass(frozen=True)
class Mentions:
    """An entity's mentions: unit ids (text), their rows in `bits` (the signatures as 64-bit
    words), and the xmin of the snapshot they were last read in (`horizon`)."""

    ids: tuple[str, ...]
    positions: dict[str, int]
    bits: np.ndarray
    horizon: int

    @classmethod
    def read(cls, ids: Sequence[str], bits: np.ndarray, horizon: int) -> Mentions:
        return cls(tuple(ids), {u: i for i, u in enumerate(ids)}, bits, horizon)

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes) + 160 * len(self.ids)  # an id: its str and dict entry

    def nearest(self, query: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[str]:
        """The ids of the `k` mentions whose signatures are nearest `query`'s (packed the same
        way), nearest first, ties in their order here; `rows`: among those rows only (in
        their order here, as `rows_in` gives them)."""
        bits = self.bits if rows is None else self.bits[rows]  # all of them: not copied
        if not len(bits):
            return []
        distance = np.bitwise_count(bits ^ query).sum(axis=1, dtype=np.int32)
        if k < len(distance):
            top = np.argpartition(distance, k)[:k]
            top = top[np.lexsort((top, distance[top]))]
        else:
            top = np.argsort(distance, kind="stable")
        return [self.ids[i] for i in (top if rows is None else rows[top])]

    def rows_in(self, units: frozenset[str]) -> np.ndarray:
        """The rows of the mentions of `units` (ids as text), in their order here; the
        smaller side is walked (a 5 % filter at 100k memories: 5,000 units, a main
        character's 5,000 mentions)."""
        if len(units) < len(self.ids):
            found = [p for u in units if (p := self.positions.get(u)) is not None]
            return np.sort(np.array(found, dtype=np.intp))
        inside = np.fromiter((u in units for u in self.ids), dtype=bool, count=len(self.ids))
        return np.flatnonzero(inside)

    def rows_out(self, units: frozenset[str]) -> np.ndarray:
        """The rows of the mentions of units other than `units` (few), in their order here."""
        keep = np.ones(len(self.ids), dtype=bool)
        keep[self.rows_in(units)] = False
        return np.flatnonzero(keep)

    def merged(self, ids: Sequence[str], bits: np.ndarray, horizon: int) -> Mentions:
        """These mentions with `ids` (their signatures: `bits`) added or, for an id already
        here, replaced, as read in a snapshot whose xmin was `horizon`."""
        if not ids:
            return Mentions(self.ids, self.positions, self.bits, horizon)
        if not self.ids:
            return Mentions.read(ids, bits, horizon)
        merged = self.bits.copy()
        new = [i for i, u in enumerate(ids) if u not in self.positions]
        for i, unit in enumerate(ids):
            if unit in self.positions:
                merged[self.positions[unit]] = bits[i]
        if not new:
            return Mentions(self.ids, self.positions, merged, horizon)
        added = tuple(ids[i] for i in new)
        positions = self.positions | {u: len(self.ids) + i for i, u in enumerate(added)}
        return Mentions(self.ids + added, positions, np.concatenate([merged, bits[new]]), horizon)


def unpack(signatures: bytes, count: int) -> np.ndarray:
    """`count` signatures in PostgreSQL's binary form, one after another (`varbit_send`: the
    length in bits as an int4, then the bits), as rows of 64-bit words (the embeddings'
    dimensions are a multiple of 64: 384)."""
    if not count:
        return np.zeros((0, 0), dtype=np.uint64)
    rows = np.frombuffer(signatures, dtype=np.uint8).reshape(count, -1)[:, VARBIT_HEADER:]
    return np.ascontiguousarray(rows).view(np.uint64)


def query_signature(vector: np.ndarray) -> np.ndarray:
    """The query's signature packed as the stored ones are (pgvector's `binary_quantize`: a
    dimension's bit is set when it is positive, the first dimension the highest bit)."""
    return np.frombuffer(np.packbits(vector > 0).tobytes(), dtype=np.uint64)


class MentionSignatures:
    """The signatures of the entities searches name, per (tenant, entity), at most `max_bytes`
    in all (the least recently used go first), each entry read whole again after `ttl`
    seconds."""

    def __init__(self, max_bytes: int, ttl: float) -> None:
        self._entries: TTLCache[tuple[str, UUID], Mentions] = TTLCache(
            max(max_bytes, 1), ttl, getsizeof=lambda m: max(m.nbytes, 1)
        )
        self._lock = threading.Lock()

    def read(
        self, conn: Connection[Any], tenant_id: str, entity_ids: Iterable[UUID]
    ) -> dict[UUID, Mentions]:
        """Each entity's mentions as they stand in `conn`'s snapshot: those held here brought
        up to date with what was written since, the others, and those that lost a mention
        since, read whole."""
        wanted = list(dict.fromkeys(entity_ids))
        with self._lock:
            held = {e: self._entries.get((tenant_id, e)) for e in wanted}
        known = {e: m for e, m in held.items() if m is not None}
        found: dict[UUID, Mentions] = {}
        if known:
            since = [m.horizon for m in known.values()]
            for entity, (ids, bits, horizon, removed) in _read(conn, list(known), since).items():
                if not removed:
                    found[entity] = known[entity].merged(ids, bits, horizon)
        missing = [e for e in wanted if e not in found]
        if missing:
            for entity, (ids, bits, horizon, _) in _read(conn, missing, None).items():
                found[entity] = Mentions.read(ids, bits, horizon)
        with self._lock:
            for entity, mentions in found.items():
                key = (tenant_id, entity)
                if self._entries.get(key) is held[entity]:  # no other refresh came first
                    with suppress(ValueError):  # larger than the whole cache: used, not kept
                        self._entries[key] = mentions
        return found


# One row an entity: its mentions' ids as one text and their signatures as one bytea (both
# aggregates see the rows in the same order), the xmin of the statement's snapshot, and
# whether the entity lost a mention at or after `since` (or is gone). Whole: every mention;
# since: those written at or after the entity's `since` (an index range).
_READ = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8, e.entity,
           coalesce((SELECT coalesce(n.mentions_removed >= e.since, false)
                     FROM entities n WHERE n.id = e.entity), true),
           count(ue.unit_id), coalesce(string_agg(ue.unit_id::text, ','), ''),
           coalesce(string_agg(varbit_send(ue.signature), ''::bytea), ''::bytea)
    FROM unnest(%(entities)s::uuid[], %(since)s::int8[]) AS e(entity, since)
    LEFT JOIN unit_entities ue ON ue.entity_id = e.entity AND ue.signature IS NOT NULL {since}
    GROUP BY e.entity, e.since
"""
_WHOLE = sql.SQL(_READ.format(since=""))
_SINCE = sql.SQL(_READ.format(since="AND ue.written >= e.since"))


def _read(
    conn: Connection[Any], entities: list[UUID], since: list[int] | None
) -> dict[UUID, tuple[list[str], np.ndarray, int, bool]]:
    """Entity → (ids, signatures, the snapshot's xmin, whether it lost a mention since):
    every mention (`since` None) or those written at or after each entity's `since`."""
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        rows = cur.execute(
            _WHOLE if since is None else _SINCE,
            {"entities": entities, "since": since or [0] * len(entities)},
            prepare=True,  # planned once (~1.3 ms a time)
        ).fetchall()
    return {
        entity: (ids.split(",") if count else [], unpack(bits, count), int(horizon), removed)
        for horizon, entity, removed, count, ids, bits in rows
    }
