"""The named entities' mention signatures, kept in the query service's memory (issue 29).

The entity retriever ranks an entity's mentions by the Hamming distance between their
signatures (`unit_entities.signature`, migration 0021: one bit a dimension of the unit's
embedding) and the query's, then compares the best of them with the full embeddings. Read
from PostgreSQL on every search, a main character's signatures cost ~8 ms of database time at
100k memories (5,000 mentions) and ~25 ms at 1M (57,000); held here as packed 64-bit words,
the same ranking is a popcount over an array (numpy: ~0.2 ms and ~2 ms).

They stay exact: each search first reads what changed since the entity's signatures were
last read, the rows written at or after that read's snapshot xmin (`unit_entities.written`,
migration 0023: every transaction that snapshot could not see has an id at least that), one
index range a search. A mention that went away (its unit deleted, the entity merged) may stay
listed until the entry expires (`ttl`), so the probe that compares the embeddings checks that
each unit still mentions the entity. Entries are immutable: a refresh builds a new one and
puts it in place only if no other refresh did meanwhile.
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
from psycopg import Connection
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
    def read(cls, rows: Sequence[tuple[str, bytes]], horizon: int) -> Mentions:
        ids = tuple(dict.fromkeys(r[0] for r in rows))
        if len(ids) < len(rows):  # an id twice (not from one snapshot): keep its last
            return cls((), {}, pack([]), horizon).merged(rows, horizon)
        return cls(ids, {u: i for i, u in enumerate(ids)}, pack([r[1] for r in rows]), horizon)

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes) + 160 * len(self.ids)  # an id: its str and dict entry

    def nearest(self, query: np.ndarray, k: int) -> list[str]:
        """The ids of the `k` mentions whose signatures are nearest `query`'s (packed the same
        way), nearest first, ties in their order here."""
        if not self.ids:
            return []
        distance = np.bitwise_count(self.bits ^ query).sum(axis=1, dtype=np.int32)
        if k < len(distance):
            top = np.argpartition(distance, k)[:k]
            top = top[np.lexsort((top, distance[top]))]
        else:
            top = np.argsort(distance, kind="stable")
        return [self.ids[i] for i in top]

    def merged(self, rows: Sequence[tuple[str, bytes]], horizon: int) -> Mentions:
        """These mentions with `rows` (id, signature) added or, for an id already here,
        replaced, as read in a snapshot whose xmin was `horizon`."""
        if not rows:
            return Mentions(self.ids, self.positions, self.bits, horizon)
        latest = dict(zip((r[0] for r in rows), pack([r[1] for r in rows]), strict=True))
        bits = self.bits.copy() if self.ids else pack([])
        new = [u for u in latest if u not in self.positions]
        for unit in latest.keys() & self.positions.keys():
            bits[self.positions[unit]] = latest[unit]
        if not new:
            return Mentions(self.ids, self.positions, bits, horizon)
        added = np.stack([latest[u] for u in new])
        bits = np.concatenate([bits, added]) if len(bits) else added
        positions = self.positions | {u: len(self.ids) + i for i, u in enumerate(new)}
        return Mentions(self.ids + tuple(new), positions, bits, horizon)


def pack(signatures: Sequence[bytes]) -> np.ndarray:
    """Signatures in PostgreSQL's binary form, as rows of 64-bit words (a multiple of 64 bits,
    as the embeddings' dimensions are: 384)."""
    if not signatures:
        return np.zeros((0, 0), dtype=np.uint64)
    raw = b"".join(s[VARBIT_HEADER:] for s in signatures)
    return np.frombuffer(raw, dtype=np.uint64).reshape(len(signatures), -1)


def query_signature(vector: np.ndarray) -> np.ndarray:
    """The query's signature packed as the stored ones are (pgvector's `binary_quantize`: a
    dimension's bit is set when it is positive, the first dimension the highest bit)."""
    return np.frombuffer(np.packbits(vector > 0).tobytes(), dtype=np.uint64)


class MentionSignatures:
    """The signatures of the entities searches name, per (tenant, entity), at most `max_bytes`
    in all, each entry read afresh after `ttl` seconds."""

    def __init__(self, max_bytes: int, ttl: float) -> None:
        self._entries: TTLCache[tuple[str, UUID], Mentions] = TTLCache(
            max(max_bytes, 1), ttl, getsizeof=lambda m: max(m.nbytes, 1)
        )
        self._lock = threading.Lock()

    def read(
        self, conn: Connection[Any], tenant_id: str, entity_ids: Iterable[UUID]
    ) -> dict[UUID, Mentions]:
        """Each entity's mentions as they stand in `conn`'s snapshot: those held here brought
        up to date with what changed since, the others read whole (one statement each way)."""
        wanted = list(dict.fromkeys(entity_ids))
        with self._lock:
            held = {e: self._entries.get((tenant_id, e)) for e in wanted}
        known = {e: m for e, m in held.items() if m is not None}
        missing = [e for e in wanted if e not in known]
        found: dict[UUID, Mentions] = {}
        if known:
            horizon, rows = _changed(conn, known)
            for entity, mentions in known.items():
                found[entity] = mentions.merged(rows.get(entity, []), horizon)
        if missing:
            horizon, rows = _all(conn, missing)
            for entity in missing:
                found[entity] = Mentions.read(rows.get(entity, []), horizon)
        with self._lock:
            for entity, mentions in found.items():
                key = (tenant_id, entity)
                if self._entries.get(key) is held[entity]:  # no other refresh came first
                    with suppress(ValueError):  # larger than the whole cache: used, not kept
                        self._entries[key] = mentions
        return found


def _grouped(rows: Sequence[Any]) -> tuple[int, dict[UUID, list[tuple[str, bytes]]]]:
    """(the snapshot's xmin, entity → its rows), from rows of (xmin, entity, unit, signature)
    with a row of NULLs for an entity that has none."""
    grouped: dict[UUID, list[tuple[str, bytes]]] = {}
    for _, entity, unit, signature in rows:
        if unit is not None and signature is not None:
            grouped.setdefault(entity, []).append((unit, signature))
    return int(rows[0][0]), grouped


def _all(
    conn: Connection[Any], entities: Sequence[UUID]
) -> tuple[int, dict[UUID, list[tuple[str, bytes]]]]:
    """Every mention of the entities, and the xmin of the snapshot they were read in."""
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        rows = cur.execute(
            """
            SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8, e.entity,
                   ue.unit_id::text, ue.signature
            FROM unnest(%(entities)s::uuid[]) AS e(entity)
            LEFT JOIN unit_entities ue ON ue.entity_id = e.entity
            """,
            {"entities": list(entities)},
        ).fetchall()
    return _grouped(rows)


def _changed(
    conn: Connection[Any], held: dict[UUID, Mentions]
) -> tuple[int, dict[UUID, list[tuple[str, bytes]]]]:
    """The mentions of the held entities written at or after each one's horizon (one index
    range each), and the xmin of the snapshot they were read in."""
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        rows = cur.execute(
            """
            SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8, e.entity,
                   ue.unit_id::text, ue.signature
            FROM unnest(%(entities)s::uuid[], %(since)s::int8[]) AS e(entity, since)
            LEFT JOIN LATERAL (
                SELECT unit_id, signature FROM unit_entities
                WHERE entity_id = e.entity AND written >= e.since::text::xid8
            ) ue ON true
            """,
            {"entities": list(held), "since": [m.horizon for m in held.values()]},
        ).fetchall()
    return _grouped(rows)
