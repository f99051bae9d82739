"""The embeddings of the mentions searches compared, held beside their signatures
(`caches.mentions`) in the query service's memory (issue 29).

They are read from PostgreSQL in the background after a search first compared them there (with
every other mention of the entity, up to `mentions.HOLD_ALL`): the entity retriever ranks its
held candidates here and asks PostgreSQL only which of the best are still active and pass the
search's filters, where it compared every candidate there, each a distance computed by the
database. Each is held with the `written` of the mention row as the search read it (a unit
re-embedded has its mention rows written again) and is read after that, so it is that
embedding or a newer one; an entry that knows a newer `written` has it read again. An
embedding that changed is never taken for the new.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import Connection, sql
from psycopg.rows import tuple_row

from memora.retrieval.caches.passing_units import unit_vectors
from memora.retrieval.filters import id_array


class MentionVectors:
    """The embeddings, as unit vectors, of those of an entity's mentions searches compared, by
    the mention's position in the entity's entries (`Mentions.ids`: a refresh only adds
    positions), each with the `written` of the mention it was read with; rows of one matrix,
    grown by doubling. The entries of an entity share one until it is read whole again."""

    def __init__(self) -> None:
        self._slot = np.zeros(0, dtype=np.int64)  # a position's row in the matrix, + 1 (0: none)
        self._written = np.zeros(0, dtype=np.int64)  # when that mention was written
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._used = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes + self._slot.nbytes + self._written.nbytes)

    def held(self, positions: np.ndarray, written: np.ndarray) -> np.ndarray:
        """The matrix row of each of `positions` when held as written at `written` (-1: not)."""
        with self._lock:
            inside = positions < len(self._slot)
            slot = np.zeros(len(positions), dtype=np.int64)
            slot[inside] = self._slot[positions[inside]]
            same = np.zeros(len(positions), dtype=bool)
            same[inside] = self._written[positions[inside]] == written[inside]
        rows: np.ndarray = np.where(same & (slot > 0), slot - 1, -1)
        return rows

    def gather(self, rows: np.ndarray) -> np.ndarray:
        with self._lock:
            gathered: np.ndarray = self._matrix[rows]
        return gathered

    def fitting(self, count: int, width: int, room: int) -> int:
        """How many of `count` more embeddings of `width` floats may be held within `room`
        bytes: all of them when the matrix, grown as `add` grows it, fits; else those its
        rows left free hold."""
        with self._lock:
            rows, free = len(self._matrix), len(self._matrix) - self._used
        grown = max(self._used + count, 2 * rows) - rows if count > free else 0
        return count if grown * width * 4 <= room else max(free, 0)

    def add(self, positions: np.ndarray, written: np.ndarray, vectors: np.ndarray) -> None:
        """Hold `vectors` (one row a position of `positions`, read when its mention was
        `written`), where no newer one is held."""
        with self._lock:
            if len(positions) and positions.max() >= len(self._slot):
                more = np.zeros(max(int(positions.max()) + 1, 2 * len(self._slot)), np.int64)
                more[: len(self._slot)] = self._slot
                self._slot, more = more, more.copy()
                more[: len(self._written)] = self._written
                self._written = more
            new = (self._slot[positions] == 0) | (self._written[positions] < written)
            positions, written, vectors = positions[new], written[new], vectors[new]
            start, end = self._used, self._used + len(positions)
            if end > len(self._matrix):
                grown = np.empty((max(end, 2 * len(self._matrix)), vectors.shape[1]), np.float32)
                if start:
                    grown[:start] = self._matrix[:start]
                self._matrix = grown
            self._matrix[start:end] = vectors
            self._written[positions] = written
            self._slot[positions] = np.arange(start + 1, end + 1)
            self._used = end


# The cosine similarity of some units to a query, as the retriever's SQL computes it, by their
# ordinal in the list sent: those found, as an int4 array and a float8 array.
_SIMILARITIES = sql.SQL(f"""
    SELECT coalesce(array_agg(c.n::int4), '{{}}'),
           coalesce(array_agg(1 - (m.embedding <=> %(v)s::halfvec)), '{{}}')
    FROM unnest({id_array("ids")}) WITH ORDINALITY AS c(unit, n)
    JOIN memory_vectors m ON m.unit_id = c.unit
""")


def similarities(
    conn: Connection[Any], units: Sequence[str], query: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(the indexes in `units` of those active, their similarities to `query`)."""
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        row = cur.execute(
            _SIMILARITIES, {"ids": ",".join(units), "v": query}, prepare=True
        ).fetchone()
    assert row is not None  # an aggregate: always one row
    found, similarity = row
    return np.array(found, dtype=np.intp) - 1, np.array(similarity, dtype=np.float32)


# The embeddings of some units, by their ordinal in the list sent: those found, as one bytea
# of int4 ordinals and one of halfvecs in the same order. As `memory_vectors` holds them (half
# precision, what the retriever compared in PostgreSQL), from `memory_units` (wider rows) for
# a unit not active (every unit is embedded before its entities are resolved).
_VECTORS = sql.SQL(f"""
    SELECT count(*), coalesce(string_agg(int4send(c.n::int4), ''::bytea), ''::bytea),
           coalesce(string_agg(halfvec_send(v.embedding), ''::bytea), ''::bytea)
    FROM unnest({id_array("ids")}) WITH ORDINALITY AS c(unit, n)
    CROSS JOIN LATERAL (
        SELECT coalesce(
            (SELECT m.embedding FROM memory_vectors m WHERE m.unit_id = c.unit),
            (SELECT u.embedding::halfvec FROM memory_units u WHERE u.id = c.unit)
        ) AS embedding
    ) v
    WHERE v.embedding IS NOT NULL
""")


def read_vectors(conn: Connection[Any], units: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the indexes in `units` of those found, their unit vectors)."""
    with conn.cursor(binary=True, row_factory=tuple_row) as cur:
        row = cur.execute(_VECTORS, {"ids": ",".join(units)}).fetchone()
    assert row is not None  # an aggregate: always one row
    count, found, vectors = row
    return np.frombuffer(found, dtype=">i4").astype(np.intp) - 1, unit_vectors(vectors, count)
