"""The named entities' mention signatures, kept in the query service's memory (issue 29).

The entity retriever ranks an entity's mentions by the Hamming distance between their
signatures (`unit_entities.signature`, migration 0021: one bit a dimension of the unit's
embedding) and the query's, then compares the best of them with the full embeddings. Read
from PostgreSQL on every search, a main character's signatures cost database time growing
with the agent; held here as packed 64-bit words, the same ranking is a popcount over an
array, a small fraction of that (docs/retrieval.md, "What the query service holds").

They stay exact. Each search first reads what was written since the entity's signatures
were last read: the rows written at or after that read's snapshot xmin
(`unit_entities.written`, migration 0023: every transaction that snapshot could not see has
an id at least that), one index range. In the same statement it learns whether the entity
lost a mention since (`entities.mentions_removed`, set by the triggers of 0023 when a row is
deleted or moved); then the entity's mentions are read whole again, as they are when it is
first named and after `ttl`. Entries are immutable: a refresh builds a new one and puts it
in place only if no other refresh did meanwhile.

The embeddings of the mentions searches compare are held too, in the room the signatures
leave (`caches.mention_vectors`: one `MentionVectors` an entity's entries share, filled by
`MentionSignatures.hold`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple
from uuid import UUID

import numpy as np
from cachetools import Cache, TTLCache
from psycopg import Connection, sql
from psycopg.rows import tuple_row

from memora.basics import metrics
from memora.retrieval.caches.mention_vectors import MentionVectors, read_vectors, similarities
from memora.retrieval.caches.passing_units import unit_query

# An entity mentioned at most this many times has every mention's embedding held once a search
# compared some of them in PostgreSQL (a main character of a large agent: read in the
# background, in a fraction of a second); a commoner one, those compared
HOLD_ALL = 10_000
HOLD_CHUNK = 2_000  # embeddings read a statement (3 MB)
VARBIT_HEADER = 4  # PostgreSQL's binary form of a bit string: its length (int4), then the bits


@dataclass(frozen=True)
class Unheld:
    """Mentions a search compared in PostgreSQL, whose embeddings are to be read and held:
    the entity's mentions as the search read them, and the rows of those compared."""

    mentions: Mentions
    rows: np.ndarray


def rows_without(rows: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`rows` (in their order) other than `out`: compared pairwise when both are few (faster
    there than `np.isin`, which sorts), else by `np.isin`."""
    kept: np.ndarray = (
        (rows[:, None] != out).all(axis=1) if len(rows) * len(out) <= 4096 else ~np.isin(rows, out)
    )
    return np.compress(kept, rows)


@dataclass(frozen=True)
class Mentions:
    """An entity's mentions: unit ids (text), their rows in `bits` (the signatures as 64-bit
    words) and in `written` (when each was last written: a transaction id, 0 for rows from
    before migration 0023), the xmin of the snapshot they were last read in (`horizon`), and
    the embeddings searches compared (`vectors`)."""

    ids: tuple[str, ...]
    positions: dict[str, int]
    bits: np.ndarray
    written: np.ndarray
    horizon: int
    vectors: MentionVectors = field(default_factory=MentionVectors)

    @classmethod
    def read(
        cls, ids: Sequence[str], bits: np.ndarray, written: np.ndarray, horizon: int
    ) -> Mentions:
        return cls(tuple(ids), {u: i for i, u in enumerate(ids)}, bits, written, horizon)

    @property
    def nbytes(self) -> int:
        """The signatures' bytes with their ids (a str and a dict entry each) and when each
        was written; not the embeddings held (`vectors`), which grow after the entry is in."""
        return int(self.bits.nbytes + self.written.nbytes) + 160 * len(self.ids)

    def nearest(self, query: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[str]:
        """The ids of the `k` mentions whose signatures are nearest `query`'s (packed the same
        way), nearest first, ties in their order here; `rows`: among those rows only (in
        their order here, as `rows_in` gives them)."""
        return [self.ids[i] for i in self.nearest_rows(query, k, rows).tolist()]

    def nearest_rows(
        self,
        query: np.ndarray,
        k: int,
        rows: np.ndarray | None = None,
        without: np.ndarray | None = None,
    ) -> np.ndarray:
        """`nearest`, as the mentions' rows here: among `rows` (all of them by default: not
        copied), other than `without` (rows, few: the nearest `k` and as many more are
        ranked, and those dropped)."""
        extra = 0 if without is None else len(without)
        bits = self.bits if rows is None else self.bits[rows]
        if not len(bits):
            return np.zeros(0, dtype=np.intp)
        distance = np.bitwise_count(bits ^ query).sum(axis=1, dtype=np.int32)
        if k + extra < len(distance):
            top = np.argpartition(distance, k + extra)[: k + extra]
            top = top[np.lexsort((top, distance[top]))]
        else:
            top = np.argsort(distance, kind="stable")
        found = top if rows is None else rows[top]
        return found if without is None or not extra else rows_without(found, without)[:k]

    def similarity(
        self,
        conn: Connection[Any],
        rows: np.ndarray,
        query: np.ndarray,
        unheld: list[Unheld] | None = None,
    ) -> np.ndarray:
        """The cosine similarity to `query` of the mentions in `rows` (NaN for one no longer
        there): here for those whose embeddings are held as the mention was written when
        read; for the others, by PostgreSQL, their embeddings noted in `unheld` to be read
        and held later (`MentionSignatures.hold`), or, without `unheld`, read now and held."""
        unit = unit_query(query)
        written = self.written[rows]
        held = self.vectors.held(rows, written)
        here = held >= 0
        similarity = np.full(len(rows), np.nan, dtype=np.float32)
        if here.any():
            similarity[here] = self.vectors.gather(held[here]) @ unit
        if here.all():
            return similarity
        away = np.flatnonzero(~here)
        ids = [self.ids[i] for i in rows[away].tolist()]
        if unheld is not None:
            found, compared = similarities(conn, ids, query)
            similarity[away[found]] = compared
            unheld.append(Unheld(self, rows[away]))
        else:  # held as the mention was written when read: what is read now is that or newer
            found, read = read_vectors(conn, ids)
            similarity[away[found]] = read @ unit
            self.vectors.add(rows[away][found], written[away][found], read)
        return similarity

    def rows_in(self, units: frozenset[str]) -> np.ndarray:
        """The rows of the mentions of `units` (ids as text), in their order here; the
        smaller side is walked (a narrow filter's units and a main character's mentions are
        alike in number)."""
        if len(units) < len(self.ids):
            found = [p for u in units if (p := self.positions.get(u)) is not None]
            return np.sort(np.array(found, dtype=np.intp))
        inside = np.fromiter((u in units for u in self.ids), dtype=bool, count=len(self.ids))
        return np.flatnonzero(inside)

    def merged(
        self, ids: Sequence[str], bits: np.ndarray, written: np.ndarray, horizon: int
    ) -> Mentions:
        """These mentions with `ids` (their signatures: `bits`, when written: `written`)
        added or, for an id already here, replaced, as read in a snapshot whose xmin was
        `horizon`. The held embeddings stay (by position and by when the mention was written:
        one re-embedded is not held as written now)."""
        if not ids:
            return replace(self, horizon=horizon)
        if not self.ids:
            return replace(Mentions.read(ids, bits, written, horizon), vectors=self.vectors)
        merged, merged_written = self.bits.copy(), self.written.copy()
        new = [i for i, u in enumerate(ids) if u not in self.positions]
        for i, unit in enumerate(ids):
            if unit in self.positions:
                merged[self.positions[unit]] = bits[i]
                merged_written[self.positions[unit]] = written[i]
        if not new:
            return Mentions(self.ids, self.positions, merged, merged_written, horizon, self.vectors)
        added = tuple(ids[i] for i in new)
        positions = self.positions | {u: len(self.ids) + i for i, u in enumerate(added)}
        return Mentions(
            self.ids + added, positions, np.concatenate([merged, bits[new]]),
            np.concatenate([merged_written, written[new]]), horizon, self.vectors,
        )  # fmt: skip


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
    seconds unsearched; and the embeddings of their mentions searches compared, in what the
    signatures leave free: a new entity's signatures make them give up room, never the
    other way round."""

    def __init__(self, max_bytes: int, ttl: float) -> None:
        self._entries: TTLCache[tuple[str, UUID], Mentions] = TTLCache(
            max(max_bytes, 1), ttl, getsizeof=lambda m: max(m.nbytes, 1)
        )
        self._lock = threading.Lock()

    def footprint(self) -> tuple[int, int]:
        """Entities held and the bytes of their signatures and embeddings."""
        with self._lock:
            embeddings = sum(m.vectors.nbytes for _, m in self._held())
            return len(self._entries), int(self._entries.currsize) + embeddings

    def room(self) -> int:
        """The bytes of `max_bytes` the signatures and the embeddings held leave free."""
        with self._lock:
            return self._room()

    def _room(self) -> int:  # under the lock
        embeddings = sum(m.vectors.nbytes for _, m in self._held())
        return int(self._entries.maxsize - self._entries.currsize) - embeddings

    def _held(self) -> list[tuple[tuple[str, UUID], Mentions]]:
        """Under the lock: the entries, their order of use untouched (the cache's own lookups
        would make each the most recently used)."""
        self._entries.expire()
        return [
            (k, Cache.__getitem__(self._entries, k)) for k in list(Cache.__iter__(self._entries))
        ]

    def _shed(self) -> None:
        """Under the lock, after signatures were put in: embeddings given up (those of the
        entities holding most first) until signatures and embeddings fit in `max_bytes`. The
        entry takes an empty `MentionVectors` (a search using the old one still can), in its
        place: neither its expiry nor its order of use changes."""
        over = -self._room()
        for key, mentions in sorted(self._held(), key=lambda e: -e[1].vectors.nbytes):
            if over <= 0 or not mentions.vectors.nbytes:
                break
            over -= mentions.vectors.nbytes
            Cache.__setitem__(self._entries, key, replace(mentions, vectors=MentionVectors()))

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
            for entity, r in _read(conn, list(known), since).items():
                if not r.removed:
                    found[entity] = known[entity].merged(r.ids, r.bits, r.written, r.horizon)
                    metrics.MENTION_CACHE_READS.labels("changes").inc()
        missing = [e for e in wanted if e not in found]
        if missing:
            for entity, r in _read(conn, missing, None).items():  # new positions: no embeddings
                found[entity] = Mentions.read(r.ids, r.bits, r.written, r.horizon)
                metrics.MENTION_CACHE_READS.labels("whole").inc()
        with self._lock:
            for entity, mentions in found.items():
                key = (tenant_id, entity)
                if self._entries.get(key) is held[entity]:  # no other refresh came first
                    with suppress(ValueError):  # larger than the whole cache: used, not kept
                        self._entries[key] = mentions
            if missing:  # signatures read whole: room for them first
                self._shed()
        return found

    def hold(self, conn: Connection[Any], unheld: Sequence[Unheld]) -> None:
        """Read and hold the embeddings of the mentions searches compared in PostgreSQL
        (`Mentions.similarity`), and of every other mention of an entity mentioned at most
        `HOLD_ALL` times, but those held since: each as its mention was written when the
        search read it (what is read now is that or newer), `HOLD_CHUNK` a statement. Only as
        many as `max_bytes` has room for beside the signatures: embeddings never push out an
        entity's signatures (a main character's mentions' embeddings take several times its
        signatures' room; evicted, its signatures were read whole again every few searches)."""
        for wanted in unheld:
            mentions = wanted.mentions
            rows = np.arange(len(mentions.ids)) if len(mentions.ids) <= HOLD_ALL else wanted.rows
            rows = rows[mentions.vectors.held(rows, mentions.written[rows]) < 0]
            width = 64 * mentions.bits.shape[1]  # the embedding's dimensions, a bit each
            room = self.room() - 32 * len(mentions.ids)  # the positions' slots, doubled
            rows = rows[: mentions.vectors.fitting(len(rows), width, room)]
            for start in range(0, len(rows), HOLD_CHUNK):
                chunk = rows[start : start + HOLD_CHUNK]
                found, read = read_vectors(conn, [mentions.ids[i] for i in chunk.tolist()])
                mentions.vectors.add(chunk[found], mentions.written[chunk[found]], read)
                metrics.MENTION_CACHE_READS.labels("embeddings").inc(len(found))


# One row an entity: its mentions' ids as one text, their signatures and when they were
# written as two bytea (the aggregates see the rows in the same order), the xmin of the
# statement's snapshot, and whether the entity lost a mention at or after `since` (or is
# gone). Whole: every mention; since: those written at or after the entity's `since` (an
# index range). The arrays come through sub-selects, so that no plan knows their lengths:
# planned for them, each custom plan cost less than the generic one, which PostgreSQL then
# never chose, and the statement was planned every search (kept with the generic plan, a call
# costs less; that plan: a nested loop over the entities into `idx_unit_entities_written`,
# index only, as the custom ones).
_READ = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8, e.entity,
           coalesce((SELECT coalesce(n.mentions_removed >= e.since, false)
                     FROM entities n WHERE n.id = e.entity), true),
           count(ue.unit_id), coalesce(string_agg(ue.unit_id::text, ','), ''),
           coalesce(string_agg(varbit_send(ue.signature), ''::bytea), ''::bytea),
           coalesce(string_agg(int8send(coalesce(ue.written, 0)), ''::bytea), ''::bytea)
    FROM unnest((SELECT %(entities)s::uuid[]), (SELECT %(since)s::int8[])) AS e(entity, since)
    LEFT JOIN unit_entities ue ON ue.entity_id = e.entity AND ue.signature IS NOT NULL {since}
    GROUP BY e.entity, e.since
"""
_WHOLE = sql.SQL(_READ.format(since=""))
_SINCE = sql.SQL(_READ.format(since="AND ue.written >= e.since"))


class _Read(NamedTuple):
    removed: bool  # whether the entity lost a mention since
    ids: list[str]
    bits: np.ndarray
    written: np.ndarray
    horizon: int  # the snapshot's xmin


def _read(
    conn: Connection[Any], entities: list[UUID], since: list[int] | None
) -> dict[UUID, _Read]:
    """Each entity's mentions: every one (`since` None) or those written at or after the
    entity's `since`."""
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        rows = cur.execute(
            _WHOLE if since is None else _SINCE,
            {"entities": entities, "since": since or [0] * len(entities)},
            prepare=True,  # kept with one generic plan (above)
        ).fetchall()
    return {
        entity: _Read(
            removed, ids.split(",") if count else [], unpack(bits, count),
            np.frombuffer(written, dtype=">i8").astype(np.int64), int(horizon),
        )
        for horizon, entity, removed, count, ids, bits, written in rows
    }  # fmt: skip
