"""The keyword index of the units passing a filter, kept in the query service's memory (issue 29).

Under a filter few units pass, the keyword retriever let the filter select in PostgreSQL
(`KeywordIndex._filtered`): the units holding the query's rarest terms, at most the match
budget of them and the newest first, each scored from its tsvector. That made it the longest
of a filtered search's retrievers, several times its unfiltered time, and it missed part of
the exact BM25 top 50 (docs/retrieval.md, "What the query service holds"). The units a
recurring filter passes (a conversation, a speaker, a period: what chat platforms search turn
after turn) are few enough to index here: each lexeme's postings among them (the unit's
position, the lexeme's term frequency) and each unit's length, so BM25 over every passing unit
is a few array operations on the query's terms, exact rather than budgeted. The agent's N, df
and average length stay the keyword index's (`KeywordIndex.stats`), so the weights are those of
a search in PostgreSQL.

Entries stay exact as the filter's units with their embeddings do (`caches.passing_units`):
each search first reads the filter's rows written at or after the snapshot xmin of the entry's
last read (`memory_vectors.written`, migration 0024; a unit's text is written with its vector
row, migration 0028) with their tsvectors, one index range, and whether the agent lost a vector
or had a filter column changed since (`vector_removals`): then the entry is dropped and read
whole again in the background, as on a filter's second search and after the TTL, while the
searches in between let PostgreSQL select.
"""

from __future__ import annotations

import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.basics import metrics
from memora.retrieval.caches.filter_holder import FilterHolder
from memora.retrieval.caches.passing_units import read_passing
from memora.retrieval.filters import vector_scope
from memora.retrieval.types import SearchScope

TERMS_CAP = 20_000  # a filter more units pass is selected in PostgreSQL, as before

# a lexeme of a tsvector's text form: quoted, quotes and backslashes doubled, then its
# positions (each with an optional weight letter), absent when the tsvector was stripped
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)'(?::([0-9A-D,]+))?")
_ESCAPED = re.compile(r"''|\\(.)")

Postings = tuple[np.ndarray, np.ndarray]  # the passing units' positions (int32), their tf


def lexemes(tsvector: str) -> list[tuple[str, int]]:
    """(lexeme, term frequency) of a tsvector in its text form: tf counts its positions (1
    when it has none), as `memory_postings` counts them."""
    return [  # one str per lexeme, however many units hold it
        (sys.intern(_unescaped(word)), positions.count(",") + 1)
        for word, positions in _LEXEME.findall(tsvector)
    ]


def _unescaped(word: str) -> str:
    if "'" not in word and "\\" not in word:
        return word
    return _ESCAPED.sub(lambda m: m.group(1) or "'", word)


@dataclass(frozen=True)
class HeldTerms:
    """The units passing a filter (ids as text, a position each), each one's lexemes and length
    (distinct lexemes), each lexeme's postings; the xmin of the snapshot they were last read
    in, when (`time.monotonic`) they were read whole, and how many postings there are."""

    ids: tuple[str, ...]
    positions: dict[str, int]
    words: tuple[tuple[str, ...], ...]
    lengths: np.ndarray
    index: dict[str, Postings]
    horizon: int
    whole_at: float
    postings: int

    @classmethod
    def read(cls, units: dict[str, list[tuple[str, int]]], horizon: int, at: float) -> HeldTerms:
        ids = tuple(units)
        words = tuple(tuple(w for w, _ in units[u]) for u in ids)
        lengths = np.fromiter((len(w) for w in words), dtype=np.float64, count=len(words))
        return cls(
            ids, {u: i for i, u in enumerate(ids)}, words, lengths,
            _index(enumerate(units.values())), horizon, at, int(lengths.sum()),
        )  # fmt: skip

    @property
    def nbytes(self) -> int:
        # a posting: 8 bytes in its arrays and its lexeme's place in its unit's tuple; a
        # lexeme: its str, two arrays and dict entry; a unit: its id (str, dict entry), tuple
        return 16 * self.postings + 360 * len(self.index) + 220 * len(self.ids)

    @property
    def count(self) -> int:
        return len(self.ids)

    def best(
        self, idf: dict[str, float], avgdl: float, limit: int, *, k1: float, b: float
    ) -> list[tuple[UUID, float]]:
        """The `limit` units best by BM25 over the terms of `idf` (each term's idf), ties by
        id, as `KeywordIndex` ranks them in PostgreSQL; units holding no term are left out."""
        scores = np.zeros(self.count, dtype=np.float64)
        for term, weight in idf.items():
            found = self.index.get(term)
            if found is None:
                continue
            units, tf = found
            norm = k1 * (1 - b + b * self.lengths[units] / avgdl)
            scores[units] += weight * tf * (k1 + 1) / (tf + norm)
        matched = np.flatnonzero(scores)
        if limit <= 0 or not len(matched):
            return []
        if limit < len(matched):
            cut = np.partition(scores[matched], len(matched) - limit)[len(matched) - limit]
            matched = matched[scores[matched] >= cut]  # the ties at the cut too
        ranked = sorted(matched.tolist(), key=lambda i: (-scores[i], self.ids[i]))[:limit]
        return [(UUID(self.ids[i]), float(scores[i])) for i in ranked]

    def merged(self, units: dict[str, list[tuple[str, int]]], horizon: int) -> HeldTerms:
        """With the units written since (`units`: their lexemes as they are now) added or, for
        a unit already here, its postings replaced, as read in a snapshot whose xmin was
        `horizon`."""
        if not units:
            return replace(self, horizon=horizon)
        ids, positions, words = list(self.ids), dict(self.positions), list(self.words)
        changed: set[str] = set()  # the lexemes whose postings change
        moved: list[int] = []
        postings = self.postings
        for unit, found in units.items():
            at = positions.get(unit)
            if at is None:
                positions[unit] = at = len(ids)
                ids.append(unit)
                words.append(())
            changed.update(words[at])
            postings += len(found) - len(words[at])
            words[at] = tuple(w for w, _ in found)
            changed.update(words[at])
            moved.append(at)
        lengths = np.zeros(len(ids), dtype=np.float64)
        lengths[: self.count] = self.lengths
        lengths[moved] = [len(words[at]) for at in moved]
        index = dict(self.index)
        added = _index(zip(moved, units.values(), strict=True))
        for word in changed:
            kept = index.pop(word, None)
            if kept is not None:
                keep = ~np.isin(kept[0], moved)
                kept = (kept[0][keep], kept[1][keep])
            add = added.get(word)
            if kept is not None and add is not None:
                index[word] = (np.concatenate([kept[0], add[0]]), np.concatenate([kept[1], add[1]]))
            elif kept is not None and len(kept[0]):
                index[word] = kept
            elif add is not None:
                index[word] = add
        return HeldTerms(
            tuple(ids), positions, tuple(words), lengths, index, horizon, self.whole_at, postings
        )


def _index(units: Iterable[tuple[int, Sequence[tuple[str, int]]]]) -> dict[str, Postings]:
    """Each lexeme's postings among `units` (position, its lexemes)."""
    found: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for at, words in units:
        for word, tf in words:
            where, counts = found[word]
            where.append(at)
            counts.append(tf)
    return {
        word: (np.array(where, dtype=np.int32), np.array(counts, dtype=np.int32))
        for word, (where, counts) in found.items()
    }


class FilterTerms(FilterHolder[HeldTerms]):
    """The keyword indexes of the units passing the narrow filters searches use, per (tenant,
    agent, fact types, filter), at most `max_bytes` in all (the least recently used go first),
    each read whole again after `ttl` seconds; a filter more than `at_most` units pass is not
    held. Read whole in the background, from a filter's second search (`wanted`, `load`)."""

    def __init__(
        self, max_bytes: int, ttl: float, *, at_most: int = TERMS_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        super().__init__(
            max_bytes, ttl, at_most=at_most, reads=metrics.FILTER_TERMS_READS, clock=clock
        )

    def key(self, scope: SearchScope) -> tuple[Any, ...]:
        return scope.units_key

    def _whole(self, conn: Connection[Any], scope: SearchScope) -> HeldTerms | None:
        if _count(conn, scope, self.at_most + 1) > self.at_most:
            return None  # a broad filter: its units' lexemes are not read for nothing
        horizon, _, units = _read(conn, scope, cap=self.at_most + 1)
        return HeldTerms.read(units, horizon, self.now())

    def _changes(
        self, conn: Connection[Any], scope: SearchScope, held: HeldTerms
    ) -> HeldTerms | None:
        horizon, removed, units = _read(conn, scope, since=held.horizon)
        return None if removed else held.merged(units, horizon)


# One row: the xmin of the statement's snapshot, whether the agent lost a vector or had a filter
# column changed at or after `since` (when given), and the passing units' ids and tsvectors (in
# their text form; '' for a unit without one) as two arrays in the same order: every one (at
# most `cap`), or those written at or after `since` (an index range).
_READ = """
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 AS horizon, {removed} AS removed,
           coalesce(array_agg(m.unit_id::text), '{{}}') AS ids,
           coalesce(array_agg(coalesce(s.search_vector::text, '')), '{{}}') AS words
    FROM (SELECT m.unit_id FROM memory_vectors m WHERE {scope} {where} {since}) AS m
    LEFT JOIN memory_search s ON s.unit_id = m.unit_id
"""


def _read(
    conn: Connection[Any], scope: SearchScope, *, since: int | None = None, cap: int = 0
) -> tuple[int, bool, dict[str, list[tuple[str, int]]]]:
    """(the snapshot's xmin, whether a vector was removed since, each unit's lexemes) of the
    units passing the scope's filter: at most `cap` of all (`since` None), or those written at
    or after `since`."""
    row = read_passing(conn, scope, _READ, since=since, cap=cap)
    units = {u: lexemes(text) for u, text in zip(row["ids"], row["words"], strict=True)}
    return int(row["horizon"]), bool(row["removed"]), units


def _count(conn: Connection[Any], scope: SearchScope, cap: int) -> int:
    """How many units pass the scope's filter, counting at most `cap`."""
    where = scope.where
    row = conn.execute(
        f"SELECT count(*) AS n FROM (SELECT 1 FROM memory_vectors m "
        f"WHERE {vector_scope('m')} {where.sql} LIMIT %(cap)s) AS m",
        {**scope.params, **where.params, "cap": cap},
        prepare=where.prepare,
    ).fetchone()
    return int(row["n"]) if row else 0
