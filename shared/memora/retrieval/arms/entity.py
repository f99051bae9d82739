"""The entity retriever: the agent's entities a query names, and the units mentioning them most
similar to the rest of the query.

An entity's mentions, their signatures and the embeddings searches compared are held in the
query service (`caches.mentions`): the candidates are ranked there, and PostgreSQL
is asked only which of the best are still active and pass the search's filters, by key.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.retrieval import expansion
from memora.retrieval.arms.base import Arm, NamedEntities, Search
from memora.retrieval.caches.mentions import (
    Mentions,
    MentionSignatures,
    Unheld,
    query_signature,
    rows_without,
)
from memora.retrieval.filters import NO_FILTER, Matching, UnitSet, Where, id_array, vector_scope
from memora.retrieval.types import ArmResult, SearchScope

# The common entity's mentions compared with full embeddings: this many per unit wanted, the
# best by their signatures' Hamming distance; fewer lose more of the exact list than the HNSW
# walk did (docs/retrieval.md, "The retrievers"). Each is compared in the query service (its
# embedding read once, then held).
SIGNATURE_OVERSAMPLE = 20
# Under filters the signatures cannot check, this many times as many best signatures
FILTERED_SIGNATURES = 4
# The ranked units checked by key in a first round: this many per unit still wanted (under a
# filter checked by key, twice as many, or this many over the share the planner expects to
# pass); each further round checks twice as many
FIRST_CHECK = 2


def query_entities(
    conn: Connection[Any], scope: SearchScope, *, names: Sequence[str]
) -> dict[UUID, list[str]]:
    """The agent's entities whose normalised name or an alias is one of `names`: id → the
    names of it that matched."""
    return named_entities(conn, scope, names=names)[0]


def named_entities(
    conn: Connection[Any], scope: SearchScope, *, names: Sequence[str]
) -> tuple[dict[UUID, list[str]], frozenset[str]]:
    """`query_entities`, and every name and alias of those entities (normalised). Planned for
    its agent each time: prepared, PostgreSQL soon keeps one plan for every agent, reading the
    agent's every entity to test the names and aliases, where a large agent's own plan ORs
    the name index and the aliases' (migration 0039)."""
    if not names:
        return {}, frozenset()
    rows = conn.execute(
        """
        SELECT e.id, e.normalized_name, e.aliases FROM entities e
        WHERE e.agent_id = %(agent)s
          AND (e.normalized_name = ANY(%(names)s) OR e.aliases && %(names)s)
        """,
        {"agent": scope.agent_key, "names": list(names)},
        prepare=False,
    ).fetchall()
    wanted = set(names)
    every = [{r["normalized_name"], *r["aliases"]} for r in rows]
    matched = {r["id"]: sorted(known & wanted) for r, known in zip(rows, every, strict=True)}
    return matched, frozenset().union(*every)


def entity_units(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    entity_ids: Sequence[UUID],
    vector: np.ndarray,
    per_entity: int,
    min_similarity: float,
    mentions: MentionSignatures,
    exact_max: int = 2000,
    oversample: int = SIGNATURE_OVERSAMPLE,
    matching: Matching | None = None,
    unheld: list[Unheld] | None = None,
    read: dict[UUID, Mentions] | None = None,
) -> list[tuple[UUID, float]]:
    """For each entity, the `per_entity` units mentioning it most similar to `vector` (and
    passing the search's filters); a unit mentioning several keeps its similarity once. Best
    first.

    `matching`: who passes the filters, as far as known. When every unit that passes is known
    (`Matching.complete`, after the semantic retriever's exact scan) and at most `exact_max`
    pass, they are sent with the statement and the mentions among them ranked exactly in
    PostgreSQL: the entity's mentions read from their index, kept when in that set, compared
    by key.

    Otherwise the entities' mentions come from `mentions` (their signatures in memory, brought
    up to date with what changed; `read` is given them as read) and are ranked in the query
    service (`_ranked_mentions`): those of units known to pass, or not known to fail, and of
    a common entity the `oversample` · `per_entity` best by signature (`FILTERED_SIGNATURES`
    times as many under filters the signatures cannot check). PostgreSQL then checks the best
    by key, in their order, until `per_entity` of each entity's are active and pass
    (`_first_passing`; where every unit that passes is known, they are checked against those
    here)."""
    if matching is not None and (listed_ids := matching.listed(exact_max)) is not None:
        return _entity_units_among(
            conn, scope, entity_ids=entity_ids, vector=vector, per_entity=per_entity,
            min_similarity=min_similarity, passing_ids=listed_ids,
        )  # fmt: skip
    passing = matching.complete if matching is not None else None
    failing = matching.failing if matching is not None and passing is None else None
    where = scope.where if passing is None and failing is None else NO_FILTER  # checked by key
    scan = oversample * per_entity * (FILTERED_SIGNATURES if where.sql else 1)
    held = mentions.read(conn, scope.tenant_id, entity_ids)
    if read is not None:
        read.update(held)
    ranked = _ranked_mentions(
        conn, list(held.values()), vector=vector, min_similarity=min_similarity,
        exact_max=exact_max, scan=scan, passing=passing, failing=failing, unheld=unheld,
    )  # fmt: skip
    first = FIRST_CHECK * (2 if where.sql else 1)
    if where.sql and matching is not None and matching.share:
        first = max(first, math.ceil(FIRST_CHECK / matching.share))  # the planner's estimate
    found = _first_passing(conn, scope, where, ranked, per_entity, first, passing)
    return sorted(((UUID(u), s) for u, s in found.items()), key=lambda x: (-x[1], str(x[0])))


def _ranked_mentions(
    conn: Connection[Any],
    entities: list[Mentions],
    *,
    vector: np.ndarray,
    min_similarity: float,
    exact_max: int,
    scan: int,
    passing: frozenset[str] | None,
    failing: UnitSet | None,
    unheld: list[Unheld] | None,
) -> list[Ranked]:
    """Each entity's candidates at least `min_similarity` similar to `vector`, most similar
    first, compared in the query service with their embeddings, held there once read: those
    not held yet are compared by PostgreSQL and noted in `unheld`, for the caller to have them
    read and held in the background (`MentionSignatures.hold`; without `unheld`, they are read
    now). An entity mentioned at most `exact_max` times has every mention compared. A commoner
    one (a main character of a long chat: tens of thousands of mentions in a large agent) has
    its mentions ranked by their signatures' Hamming distance from the query's first, and the
    `scan` best are compared. When every unit that passes is known (`passing`) but too many to
    send (above `exact_max`: sending them costs more than keeping the mentions to them here),
    the mentions are first kept to those units, then ranked and compared as unfiltered ones
    (under a narrow filter, a main character's few passing mentions all compared); likewise,
    the units failing a broad filter (`failing`, few) are taken out, when they are known."""
    signature = query_signature(vector)
    ranked: list[Ranked] = []
    for listed in entities:
        rows = listed.rows_in(passing) if passing is not None else None  # None: all of them
        out = listed.rows_in(failing.text) if failing is not None else None  # few, if any
        if (len(listed.ids) if rows is None else len(rows)) > exact_max:
            rows = listed.nearest_rows(signature, scan, rows, without=out)
        else:
            rows = np.arange(len(listed.ids)) if rows is None else rows
            if out is not None and len(out):
                rows = rows_without(rows, out)
        if not len(rows):
            continue
        similarity = listed.similarity(conn, rows, vector, unheld)
        order = np.argsort(-similarity, kind="stable")  # a unit gone since: NaN, last
        similarity = similarity[order]
        close = int(np.count_nonzero(similarity >= min_similarity))
        ranked.append(Ranked(listed.ids, rows[order[:close]], similarity[:close]))
    return ranked


class Ranked(NamedTuple):
    """An entity's candidates, most similar first: the mentions' rows in `ids`, and their
    similarities."""

    ids: Sequence[str]
    rows: np.ndarray
    similarity: np.ndarray

    def unit(self, k: int) -> tuple[str, float]:
        return self.ids[self.rows[k]], float(self.similarity[k])


def _first_passing(
    conn: Connection[Any],
    scope: SearchScope,
    where: Where,
    ranked: list[Ranked],
    per_entity: int,
    first: int,
    passing: frozenset[str] | None = None,
) -> dict[str, float]:
    """Unit → similarity: of each of `ranked`, the first `per_entity` units that are active,
    of the search's fact types and pass `where`. They are checked by key in rounds: `first`
    per unit still wanted at first, twice as many each round after; a unit several entities
    rank is checked once. With `passing` (every unit that is searchable, of the search's fact
    types and passes its filters: `Matching.complete`) they are checked against it, here."""
    verdicts: dict[str, bool] = {}
    kept: list[list[tuple[str, float]]] = [[] for _ in ranked]
    walked = [0] * len(ranked)
    factor = first
    while True:
        asked: dict[str, None] = {}
        for i, candidates in enumerate(ranked):
            while walked[i] < len(candidates.rows) and len(kept[i]) < per_entity:
                unit, similarity = candidates.unit(walked[i])
                if unit not in verdicts:
                    break
                walked[i] += 1
                if verdicts[unit]:
                    kept[i].append((unit, similarity))
            wanted = per_entity - len(kept[i])
            if wanted > 0:
                ahead = candidates.rows[walked[i] : walked[i] + factor * wanted].tolist()
                asked.update((u, None) for r in ahead if (u := candidates.ids[r]) not in verdicts)
        if not asked:
            break
        passed = (
            passing.intersection(asked) if passing is not None
            else _passing(conn, scope, where, list(asked))
        )  # fmt: skip
        verdicts.update((u, u in passed) for u in asked)
        factor *= 2
    found: dict[str, float] = {}
    for unit, similarity in (pair for pairs in kept for pair in pairs):
        found[unit] = max(similarity, found.get(unit, similarity))
    return found


def _passing(conn: Connection[Any], scope: SearchScope, where: Where, ids: list[str]) -> set[str]:
    """Those of `ids` that are active, of the search's fact types and pass `where`."""
    row = conn.execute(
        f"""
        SELECT string_agg(c.unit::text, ',') AS passed
        FROM unnest({id_array("ids")}) AS c(unit)
        CROSS JOIN LATERAL (  -- a probe by id each, whatever the agent's row estimate
            SELECT 1 FROM memory_vectors m
            WHERE m.unit_id = c.unit AND {vector_scope("m")} {where.sql} LIMIT 1
        ) p
        """,
        {"ids": ",".join(ids), **scope.params, **where.params},
        prepare=where.prepare,
    ).fetchone()
    return set(row["passed"].split(",")) if row and row["passed"] else set()


def _entity_units_among(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    entity_ids: Sequence[UUID],
    vector: np.ndarray,
    per_entity: int,
    min_similarity: float,
    passing_ids: str,
) -> list[tuple[UUID, float]]:
    """`entity_units` when every unit passing the filters is known (`passing_ids`)."""
    rows = conn.execute(
        f"""
        SELECT u.id, max(u.sim) AS sim FROM unnest(%(entities)s::uuid[]) AS e(entity)
        CROSS JOIN LATERAL (
            SELECT m.unit_id AS id, 1 - (m.embedding <=> %(v)s::halfvec) AS sim
            FROM unit_entities ue JOIN memory_vectors m ON m.unit_id = ue.unit_id
            WHERE ue.entity_id = e.entity AND {vector_scope("m")}
              AND ue.unit_id = ANY({id_array("passing")})
            ORDER BY sim DESC LIMIT %(per_entity)s
        ) u GROUP BY u.id
        """,
        {
            "entities": list(entity_ids), "v": vector, "per_entity": per_entity,
            "passing": passing_ids, **scope.params,
        },
    ).fetchall()  # fmt: skip
    return best(rows, min_similarity)


def best(rows: Sequence[Mapping[str, Any]], min_similarity: float) -> list[tuple[UUID, float]]:
    """The rows' (id, sim) at least `min_similarity` similar, most similar first, ties by id."""
    found = [(r["id"], float(r["sim"])) for r in rows if r["sim"] >= min_similarity]
    return sorted(found, key=lambda x: (-x[1], str(x[0])))


class EntityArm(Arm):
    """The entity retriever, in two halves. From the start of the search: the agent's entities
    the query names, and the query without their names, its text to embed with the query.
    Then: the units mentioning those entities most similar to that text. Under a filter ranked
    exactly it waits for the semantic retriever's exact scan (`matching.settled`), which knows
    every unit that passes, and compares only the mentions among them: their ids sent with the
    statement when few (at most MEMORA_FILTER_EXACT_SCAN_MAX), else the mentions held in memory
    kept to them (`entity_units`). Its time in the trace is both halves', not the waits."""

    name = "entity"
    embeds_own = True

    def skip(self, search: Search) -> str | None:
        return "off" if self.settings.entity_units_per_entity <= 0 else None

    def retrieve(self, search: Search) -> ArmResult:
        named = self._named(search)
        search.named = named
        search.give_text(self.name, named.about)
        if named.about is None:
            return ArmResult(self.name, ran=False, note=named.note)
        vector = search.vector(self.name)
        assert vector is not None
        s, scope, caches = self.settings, search.scope, self.context.caches
        if scope.where.sql:
            search.matching.settled.wait()
        started = time.perf_counter()
        unheld: list[Unheld] = []
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            ranked = entity_units(
                conn, scope, entity_ids=list(named.entities), vector=vector,
                per_entity=s.entity_units_per_entity, min_similarity=s.entity_min_similarity,
                mentions=caches.mentions, exact_max=s.filter_exact_scan_max,
                matching=search.matching, unheld=unheld, read=named.mentions,
            )  # fmt: skip
        ms = round(named.ms + (time.perf_counter() - started) * 1000, 2)
        if unheld:  # compared by PostgreSQL this time: their embeddings held for the next
            caches.hold_mentions_later(scope.tenant_id, unheld)
        return ArmResult(self.name, ranked, ms=ms)

    def _named(self, search: Search) -> NamedEntities:
        """The agent's entities the query names and the query without their names."""
        started = time.perf_counter()
        names = expansion.phrases(search.query)
        if not names:
            return NamedEntities(note="no names in the query")
        with self.pool.tenant_connection(search.scope.tenant_id, autocommit=True) as conn:
            named, known_as = named_entities(conn, search.scope, names=names)
        if not named:
            return NamedEntities()
        matched = {n for found in named.values() for n in found}
        ms = (time.perf_counter() - started) * 1000
        about = expansion.without_names(search.query, matched)
        return NamedEntities(named, about, ms, known_as=known_as)
