"""The memory links of the agents searched, held in the query service's memory (issue 29).

Graph retrieval reads each explored unit's strongest links, a wave at a time: a few reads a
search, each a round trip and database time on the search's path (docs/retrieval.md, "What
the query service holds"). Held here, an agent's links are a compressed sparse row table
(each unit's links, all of them, strongest first: target, type and weight as numpy arrays,
`LINK_BYTES` a link), read once in the background with a binary COPY; a wave's links are
slices of it.

They stay exact. Each search first asks, in one statement, what changed since the agent's
links were read: links written at or after that read's snapshot xmin (`memory_links.written`,
migration 0026), and the removals (`vector_removals`, 0024; `link_removals`, 0026) in
transactions that read did not see, each naming its units (0027). The units whose links were
written or deleted have their lists read whole again; the units that left active status (a
memory forgotten, superseded or deleted) are dropped as targets where they are read. A unit
back to active, or a removal that names no units (from before 0027, or compacted), makes the
search read PostgreSQL as without this while the agent's links are read whole again in the
background; so do `ttl`, and the lists read again or units dropped outnumbering a quarter of
the units. Links to units not active are left out when read, as the database's read leaves
them out of a unit's strongest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cachetools import TTLCache
from psycopg import Connection, sql
from psycopg.rows import tuple_row

from memora.basics import metrics
from memora.db.pool import Pool
from memora.retrieval.activation import Edge

log = logging.getLogger(__name__)

# A unit's links in the database's order: strongest first, then by target, then by type.
STRONGEST = "ORDER BY l.weight DESC, l.to_unit, l.link_type"
# the binary COPY of (source row, target row, type code, weight): a header of 19 bytes, then
# each row its field count (int2) and each field its length (int4) and value, big-endian
COPY_HEADER, COPY_TRAILER = 19, 2
UNIT_BYTES = 168  # a unit: its id's str, its dict entry, its offset
LINK_BYTES = 10  # a link: target (int32), type (int16), weight (float32)
ROW = np.dtype(
    [("n", ">i2"), ("l1", ">i4"), ("source", ">i4"), ("l2", ">i4"), ("target", ">i4"),
     ("l3", ">i4"), ("type", ">i2"), ("l4", ">i4"), ("weight", ">f4")]
)  # fmt: skip


@dataclass
class AgentLinks:
    """One agent's links to active units as read in a snapshot whose xmin was `horizon`, and
    the lists of the units whose links changed since (`changed`, read from the database)."""

    ids: list[str]  # the agent's units, in their ids' order (the database's, as text)
    rows: dict[str, int]
    offsets: np.ndarray  # unit row r's links: [offsets[r], offsets[r + 1])
    targets: np.ndarray  # int32 unit rows
    types: np.ndarray  # int16 indexes into `type_names`
    weights: np.ndarray  # float32: the stored REAL
    type_names: list[str]
    inactive: frozenset[str]  # units not active (the links to them left out)
    horizon: int
    snapshot: str  # the read's snapshot (pg_snapshot as text): removals it saw are in here
    changed: dict[str, list[Edge[str]]] = field(default_factory=dict)
    # rows of units no longer active since the read (their links in the table skipped), or None
    gone: np.ndarray | None = None
    read_at: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        arrays = self.offsets.nbytes + self.targets.nbytes + self.types.nbytes
        return int(arrays + self.weights.nbytes) + UNIT_BYTES * len(self.ids)

    def links(self, units: Sequence[str], limit: int) -> dict[str, list[Edge[str]]]:
        """Each unit's strongest `limit` links to active units, as `arms.graph.links` reads them;
        units without any left out."""
        out: dict[str, list[Edge[str]]] = {}
        for unit in units:
            edges = self._strongest(unit, limit)
            if edges:
                out[unit] = edges
        return out

    def _strongest(self, unit: str, limit: int) -> list[Edge[str]]:
        edges = self.changed.get(unit)
        if edges is not None:
            return edges[:limit]
        row = self.rows.get(unit)
        if row is None:
            return []
        start, stop = int(self.offsets[row]), int(self.offsets[row + 1])
        if self.gone is None:
            picked: slice | np.ndarray = slice(start, min(stop, start + limit))
        else:  # the first `limit` of its links to units still active
            picked = start + np.flatnonzero(~self.gone[self.targets[start:stop]])[:limit]
        return list(  # built in C: no Python loop a link
            zip(
                map(self.ids.__getitem__, self.targets[picked].tolist()),
                map(self.type_names.__getitem__, self.types[picked].tolist()),
                self.weights[picked].tolist(),
                strict=True,
            )
        )

    def drop(self, units: frozenset[str]) -> None:
        """`units` are no longer active: the links to them are left out from now on."""
        fresh = units - self.inactive
        if not fresh:
            return
        inactive = self.inactive | fresh
        rows = [self.rows[u] for u in fresh if u in self.rows]
        if rows:
            gone = np.zeros(len(self.ids), dtype=bool) if self.gone is None else self.gone.copy()
            gone[rows] = True
            self.gone = gone
        self.changed = {
            unit: [e for e in edges if e[0] not in fresh] for unit, edges in self.changed.items()
        }
        self.inactive = inactive

    @property
    def redone(self) -> int:
        """Units taken in place since the read: lists read again and units dropped."""
        return len(self.changed) + (int(self.gone.sum()) if self.gone is not None else 0)


class HeldLinks:
    """The links of the agents searched, per (tenant, agent), at most `max_bytes` in all (the
    least recently used go first), each read whole again after `ttl` seconds."""

    def __init__(self, pool: Pool, max_bytes: int, ttl: float) -> None:
        self.pool, self.max_bytes = pool, max_bytes
        self._entries: TTLCache[tuple[str, str], AgentLinks] = TTLCache(
            max(max_bytes, 1), ttl, getsizeof=lambda e: max(e.nbytes, 1)
        )
        self._reading: set[tuple[str, str]] = set()
        # agents not read again until the TTL: larger than the cache, or their read failed
        self._not_held: TTLCache[tuple[str, str], bool] = TTLCache(10_000, ttl)
        self._lock = threading.Lock()
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="memora-links-read")

    def close(self) -> None:
        self._reader.shutdown(wait=True, cancel_futures=True)

    @property
    def reading(self) -> bool:
        """Whether an agent's links are being read (for benchmarks that wait for them)."""
        with self._lock:
            return bool(self._reading)

    def current(self, conn: Connection[Any], tenant_id: str, agent_key: str) -> AgentLinks | None:
        """The agent's links as they stand in `conn`'s snapshot, or None when they are not held
        (then they are read in the background) or a removal since means they are read again."""
        key = (tenant_id, agent_key)
        with self._lock:
            held = self._entries.get(key)
        if held is None:
            self._read_later(key)
            return None
        with held.lock:
            if not _refresh(conn, held, tenant_id, agent_key):
                with self._lock:
                    if self._entries.get(key) is held:
                        del self._entries[key]
                self._read_later(key)
                return None
            if held.redone > max(1_000, len(held.ids) // 4):
                self._read_later(key)  # what was taken in place folds into a new table
        return held

    def _read_later(self, key: tuple[str, str]) -> None:
        with self._lock:
            if key in self._reading or key in self._not_held:
                return
            self._reading.add(key)
        try:
            self._reader.submit(self._read, key)
        except RuntimeError:  # shut down
            with self._lock:
                self._reading.discard(key)

    def _read(self, key: tuple[str, str]) -> None:
        tenant_id, agent_key = key
        try:
            with self.pool.tenant_connection(tenant_id, autocommit=True) as conn:
                fits = estimated_bytes(conn, agent_key) <= self.max_bytes
                links = read_whole(conn, agent_key) if fits else None
            if links is not None:
                metrics.GRAPH_CACHE_READS.labels("whole").inc()
            with self._lock:
                if links is None or links.nbytes > self.max_bytes:
                    self._not_held[key] = True  # the searches read PostgreSQL
                    self._entries.pop(key, None)
                else:
                    with suppress(ValueError):
                        self._entries[key] = links
        except Exception:  # the searches go on reading the database, not one read a search
            log.exception("reading an agent's memory links")
            with self._lock:
                self._not_held[key] = True
        finally:
            with self._lock:
                self._reading.discard(key)


def estimated_bytes(conn: Connection[Any], agent_key: str) -> int:
    """What the agent's links would take here, from its units and the table's statistics (its
    share of the units times the links there are), before a read that costs seconds (a large
    agent's links may not fit `max_bytes`)."""
    row = conn.execute(_SIZE, {"agent": agent_key}, prepare=False).fetchone()
    assert row is not None
    units, links = (float(v) for v in (row["units"], row["links"]))
    return int(UNIT_BYTES * units + LINK_BYTES * links)


def read_whole(conn: Connection[Any], agent_key: str) -> AgentLinks:
    """Every link of the agent's units, in one snapshot (REPEATABLE READ: the statements see
    the same rows), with that snapshot's xmin; `conn` in autocommit (its own transaction)."""
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        row = cur.execute(_UNITS, {"agent": agent_key}).fetchone()
        assert row is not None  # aggregates: one row
        horizon, snapshot, units, inactive, type_names = row
        ids = units.split(",") if units else []
        copy = sql.SQL(_COPY).format(agent=sql.Literal(agent_key), types=sql.Literal(type_names))
        with cur.copy(copy) as out:
            data = b"".join(bytes(chunk) for chunk in out)
    count = (len(data) - COPY_HEADER - COPY_TRAILER) // ROW.itemsize
    table = np.frombuffer(data, ROW, offset=COPY_HEADER, count=count)
    inactive_ids = frozenset(inactive.split(",")) if inactive else frozenset()
    active = np.ones(len(ids), dtype=bool)
    active[[i for i, unit in enumerate(ids) if unit in inactive_ids]] = False
    table = table[active[table["target"]]]
    source = table["source"].astype(np.int32)
    target = table["target"].astype(np.int32)
    kind = table["type"].astype(np.int16)
    weight = table["weight"].astype(np.float32)
    # the database's order: by source, then strongest, then by target, then by type (the
    # rows are in their ids' order and the codes in their names')
    order = np.lexsort((kind, target, -weight, source))
    counts = np.bincount(source, minlength=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return AgentLinks(
        ids=ids,
        rows={unit: i for i, unit in enumerate(ids)},
        offsets=offsets,
        targets=target[order],
        types=kind[order],
        weights=weight[order],
        type_names=list(type_names),
        inactive=inactive_ids,
        horizon=int(horizon),
        snapshot=snapshot,
    )


def _refresh(conn: Connection[Any], held: AgentLinks, tenant_id: str, agent_key: str) -> bool:
    """`held` brought up to what `conn` sees now; False when a removal since means it cannot
    be (then it is left as it was)."""
    params: dict[str, Any] = {
        "agent": agent_key, "tenant": tenant_id, "since": held.horizon, "seen": held.snapshot
    }  # fmt: skip
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(_CHANGES, params, prepare=True).fetchone()
        assert row is not None
        horizon, snapshot, unknown, removed, unlinked, linked = row
        if unknown:
            return False
        gone: frozenset[str] = frozenset()
        if removed:  # which of the units that lost their vectors are no longer active
            gone = frozenset(removed.split(",")) - {
                unit for (unit,) in cur.execute(_STILL_ACTIVE, {"units": removed}, prepare=False)
            }
        # the agent's units whose links were deleted: their lists are read again
        relisted = [
            u
            for u in (unlinked.split(",") if unlinked else [])
            if u in held.rows or u in held.changed
        ]
        lists: list[tuple[str, list[str], list[str], list[float]]] = []
        if linked or relisted:
            # planned for its `since` (a generic plan would scan every link), when links changed
            params["relisted"] = ",".join(relisted)
            lists = cur.execute(_LISTS, params, prepare=False, binary=True).fetchall()
    held.drop(gone)
    inactive = held.inactive
    for unit, targets, types, weights in lists:
        edges = zip(targets or [], types or [], weights or [], strict=True)
        held.changed[unit] = [e for e in edges if e[0] not in inactive] if inactive else list(edges)
    held.horizon, held.snapshot = int(horizon), snapshot
    metrics.GRAPH_CACHE_READS.labels("changes").inc()
    return True


# The agent's units (ids as one text, in their order) and those not active, the types of their
# links (in their order) and the snapshot's xmin.
_UNITS = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8, pg_current_snapshot()::text,
           coalesce(string_agg(u.id::text, ',' ORDER BY u.id), ''),
           coalesce(string_agg(u.id::text, ',') FILTER (WHERE u.status <> 'active'), ''),
           coalesce((SELECT array_agg(DISTINCT l.link_type ORDER BY l.link_type)
                     FROM memory_links l JOIN memory_units s ON s.id = l.from_unit
                     WHERE s.agent_id = %(agent)s), '{}')
    FROM memory_units u WHERE u.agent_id = %(agent)s
"""
# The agent's units and its estimated links: its share of all units times the links' count in
# the statistics.
_SIZE = """
    SELECT n.units, n.units / greatest(
               (SELECT reltuples FROM pg_class WHERE oid = 'memory_units'::regclass), n.units, 1)
           * greatest((SELECT reltuples FROM pg_class WHERE oid = 'memory_links'::regclass), 0)
           AS links
    FROM (SELECT count(*)::float8 AS units FROM memory_units WHERE agent_id = %(agent)s) n
"""
# Every link of the agent's units: the rows of its source and target in the ids' order, its
# type's code and its weight, in binary.
_COPY = """
    COPY (
        WITH u AS (SELECT id, (row_number() OVER (ORDER BY id) - 1)::int4 AS r
                   FROM memory_units WHERE agent_id = {agent})
        SELECT s.r, t.r, (array_position({types}::text[], l.link_type) - 1)::int2, l.weight
        FROM memory_links l JOIN u s ON s.id = l.from_unit JOIN u t ON t.id = l.to_unit
    ) TO STDOUT (FORMAT BINARY)
"""
# What changed since the snapshot `seen` (whose xmin is `since`: what it did not see was written
# by a transaction at least that): this statement's snapshot and its xmin; whether a removal
# `seen` did not see names no units (a unit back to active, or a row from before 0027); the
# units the agent's vector removals name, and the source units the tenant's link removals name,
# in transactions `seen` did not see (one it saw is in the held links: a long transaction
# holding the xmin back does not make them taken again and again); and whether links of the
# agent's units were written: the first such link in `written`'s order, so that any plan reads
# that index's range (planned once, a generic plan: a custom plan each time cost more than the
# statement, and the generic plan of an EXISTS, which drops its ORDER BY, scanned every link).
_UNSEEN = "NOT pg_visible_in_snapshot(r.removed::text::xid8, %(seen)s::pg_snapshot)"
_VECTORS = f"r.agent_id = %(agent)s AND r.removed >= %(since)s AND {_UNSEEN}"
_LINKS = f"r.tenant_id = %(tenant)s AND r.removed >= %(since)s AND {_UNSEEN}"
_CHANGES = f"""
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8, pg_current_snapshot()::text,
           EXISTS (SELECT 1 FROM vector_removals r WHERE {_VECTORS} AND r.units IS NULL)
           OR EXISTS (SELECT 1 FROM link_removals r WHERE {_LINKS} AND r.units IS NULL),
           (SELECT string_agg(DISTINCT u::text, ',')
            FROM vector_removals r CROSS JOIN unnest(r.units) u WHERE {_VECTORS}),
           (SELECT string_agg(DISTINCT u::text, ',')
            FROM link_removals r CROSS JOIN unnest(r.units) u WHERE {_LINKS}),
           (SELECT l.written FROM memory_links l JOIN memory_units u ON u.id = l.from_unit
            WHERE l.written >= %(since)s AND u.agent_id = %(agent)s
            ORDER BY l.written LIMIT 1) IS NOT NULL  -- the index's range in any plan
"""
# Of these units (comma-separated), those active.
_STILL_ACTIVE = """
    SELECT id::text FROM memory_units
    WHERE id = ANY(string_to_array(%(units)s, ',')::uuid[]) AND status = 'active'
"""
# Every link of each unit of the agent with a link written at or after `since`, and of the
# units `relisted` (comma-separated; empty arrays when it has none left), strongest first.
_LISTS = f"""
    SELECT c.id::text, array_agg(l.to_unit::text {STRONGEST}) FILTER (WHERE l.to_unit IS NOT NULL),
           array_agg(l.link_type {STRONGEST}) FILTER (WHERE l.to_unit IS NOT NULL),
           array_agg(l.weight::float8 {STRONGEST}) FILTER (WHERE l.to_unit IS NOT NULL)
    FROM (SELECT l.from_unit AS id FROM memory_links l
          JOIN memory_units u ON u.id = l.from_unit
          WHERE l.written >= %(since)s AND u.agent_id = %(agent)s
          UNION
          SELECT unnest(string_to_array(nullif(%(relisted)s, ''), ',')::uuid[])) c
    LEFT JOIN memory_links l ON l.from_unit = c.id
    GROUP BY c.id
"""
