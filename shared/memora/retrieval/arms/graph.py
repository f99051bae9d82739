"""The graph retriever: spreading activation (`memora.retrieval.activation`) from the semantic
retriever's nearest units over the memory links, kept to the units that pass the search's
filters. Its queries read `memory_links` and check targets on `memory_vectors`, scoped by the
search's `SearchScope` (`filters.vector_scope`, the conditions every retriever applies, and the
search's metadata filters, `scope.where`).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.rows import tuple_row

from memora.retrieval.activation import Edge, SpreadSettings, spread_activation
from memora.retrieval.arms.base import Arm, ArmContext, Search, timed
from memora.retrieval.filters import (
    NO_FILTER,
    Matching,
    Where,
    broad_count,
    id_array,
)
from memora.retrieval.types import ArmResult, SearchScope

FILTERED_SCAN = 4  # filtered graph steps look at 4 · fanout links per unit
# A unit's links in the database's order: strongest first, then by target, then by type.
STRONGEST = "ORDER BY l.weight DESC, l.to_unit, l.link_type"
_target = itemgetter(0)  # an edge's target


def graph_walk(
    conn: Connection[Any],
    scope: SearchScope,
    *,
    entry: dict[str, float],
    budget: int,
    fanout: int,
    spread: SpreadSettings,
    matching: Matching,
) -> list[tuple[UUID, float]]:
    """The graph retriever: spreading activation from the entry points (ids as text) over the
    units that pass the search's filters, most active first. For a broad filter each unit is
    checked as it comes up for exploration, otherwise (and when the units failing a broad filter
    are known) each step's links are kept to the units that pass (see `neighbours`)."""
    where = scope.where
    if matching.broad and matching.failing is None:  # broad: for filtered searches only
        found = spread_activation(
            entry,
            lambda ids: links(conn, ids, limit=FILTERED_SCAN * fanout),
            budget,
            spread,
            admit=lambda ids: passing(conn, ids, where=where, known=matching.known),
            fanout=fanout,
        )
    else:
        found = spread_activation(
            entry,
            lambda ids: neighbours(conn, ids, fanout=fanout, where=where, matching=matching),
            budget,
            spread,
        )
    return [(UUID(node), activation) for node, activation in found]


def links(
    conn: Connection[Any], ids: list[str], *, limit: int, where: Where = NO_FILTER
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `limit` links to active units (links join units of one agent
    only), strongest first, read by the index alone; with `where`, those of them to units
    that pass it, checked in the same query by one primary-key probe each. Ids travel as
    text (one comma-separated text out, which PostgreSQL parses faster than a text[]), and
    each unit's links come back as one row of three arrays, in binary: graph retrieval reads
    thousands of links per search, and a row, a UUID object or a parsed float per link were
    most of its cost. Weights are the stored REAL's exact value. Filtered, the query is
    prepared, unlike the other filtered ones: led by the ids, its plan is the same whatever
    the filter matches, and planning it cost as much as running it."""
    check = (
        f"CROSS JOIN LATERAL (SELECT 1 FROM memory_vectors m WHERE m.unit_id = l.to_unit"
        f" {where.sql} LIMIT 1) AS passes"
        if where.sql
        else ""
    )
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            f"""
            SELECT f.id::text, a.targets, a.types, a.weights
            FROM unnest({id_array("ids")}) AS f(id)
            CROSS JOIN LATERAL (  -- one unit's links, aggregated apart: no grouping of all
                SELECT array_agg(l.to_unit::text {STRONGEST}) AS targets,
                       array_agg(l.link_type {STRONGEST}) AS types,
                       array_agg(l.weight::float8 {STRONGEST}) AS weights
                FROM (
                    SELECT to_unit, link_type, weight FROM memory_links
                    WHERE from_unit = f.id AND NOT EXISTS (
                        SELECT 1 FROM memory_units x WHERE x.id = to_unit AND x.status <> 'active'
                    )  -- the few inactive units: a small partial index
                    ORDER BY weight DESC, to_unit, link_type LIMIT %(limit)s
                ) l {check}
            ) a
            WHERE a.targets IS NOT NULL
            """,
            {"ids": ",".join(ids), "limit": limit, **where.params},
            prepare=True if where.sql else None,
            binary=True,
        )
        .fetchall()
    )
    return {
        source: list(zip(targets, types, weights, strict=True))
        for source, targets, types, weights in rows
    }


def neighbours(
    conn: Connection[Any],
    ids: list[str],
    *,
    fanout: int,
    where: Where = NO_FILTER,
    matching: Matching | None = None,
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `fanout` links; with filters, its strongest `fanout` to units
    that pass them, among its FILTERED_SCAN · fanout strongest links: checked against
    `matching.complete` (every unit that passes, known after an exact scan) or
    `matching.failing` (every unit that fails a broad filter, when held), else in the links'
    query. Against failing units, the links a broad filter's share may need beyond `fanout`
    are read at once (a second read is a round trip)."""
    if not where.sql:
        return links(conn, ids, limit=fanout)
    keep = matching.complete if matching is not None else None
    failing = matching.failing if matching is not None else None
    if keep is None and failing is not None:
        share = matching.share if matching is not None and matching.share else 0.0
        limit = broad_count(fanout, share, len(failing))
        return _links_passing(conn, ids, fanout=fanout, failing=failing.text, limit=limit)
    if keep is None:
        found = links(conn, ids, limit=FILTERED_SCAN * fanout, where=where)
        return {s: edges[:fanout] for s, edges in found.items()}
    found = links(conn, ids, limit=FILTERED_SCAN * fanout)
    return {s: [e for e in edges if e[0] in keep][:fanout] for s, edges in found.items()}


def _links_passing(
    conn: Connection[Any], ids: list[str], *, fanout: int, failing: frozenset[str], limit: int
) -> dict[str, list[Edge[str]]]:
    """Each unit's strongest `fanout` links to units not in `failing` (few, under a broad
    filter), among its FILTERED_SCAN · fanout strongest, as `neighbours` keeps them: from its
    strongest `limit`, read further for the units that had more failing among them."""
    most = FILTERED_SCAN * fanout
    limit = min(limit, most)
    found: dict[str, list[Edge[str]]] = {}
    short = []
    for source, edges in links(conn, ids, limit=limit).items():
        if failing.isdisjoint(map(_target, edges)):  # mostly: checked in C
            found[source] = edges[:fanout]
            continue
        found[source] = [e for e in edges if e[0] not in failing][:fanout]
        if len(found[source]) < fanout and len(edges) == limit < most:
            short.append(source)
    if short:
        for source, edges in links(conn, short, limit=most).items():
            found[source] = [e for e in edges if e[0] not in failing][:fanout]
    return {source: edges for source, edges in found.items() if edges}


def passing(
    conn: Connection[Any], ids: list[str], *, where: Where, known: dict[str, bool]
) -> set[str]:
    """Which of these units pass `where`: those not in `known` (the verdicts so far in one
    search) checked in one query, one primary-key probe each (with `= ANY` the planner may
    AND the ids with the filter's whole index bitmap instead), their verdicts added. The
    query is prepared, unlike the other filtered ones: led by the ids, its plan is the same
    whatever the filter matches, and planning it cost as much as running it; the ids travel
    as one text, which PostgreSQL parses faster than a text[]."""
    unseen = [i for i in ids if i not in known]
    if unseen:
        found = {
            r[0]
            for r in conn.cursor(row_factory=tuple_row).execute(
                f"SELECT m.unit_id::text FROM unnest({id_array('ids')})"
                f" AS t(id) JOIN memory_vectors m ON m.unit_id = t.id WHERE true {where.sql}",
                {"ids": ",".join(unseen), **where.params},
                prepare=True,
            )
        }
        known.update((i, i in found) for i in unseen)
    return {i for i in ids if known[i]}


class GraphArm(Arm):
    """The graph retriever: spreading activation from the semantic retriever's nearest units
    (`Search.entry_points`), on a connection of its own, over the links in PostgreSQL (each
    wave's in one read)."""

    name = "graph"

    def __init__(self, context: ArmContext) -> None:
        super().__init__(context)
        self.spread = SpreadSettings.from_settings(context.settings)

    def retrieve(self, search: Search) -> ArmResult:
        s, scope = self.settings, search.scope
        # each statement its own snapshot, as the keyword and entity retrievers read: no
        # transaction to begin, nor to commit once the walk is done
        with self.pool.tenant_connection(scope.tenant_id, autocommit=True) as conn:
            nearest = search.entry_points.result()
            entry = {
                str(i): 1.0 for i, sim in nearest[: s.graph_entry_points]
                if sim >= s.graph_entry_similarity
            }  # fmt: skip
            found = timed(
                self.name,
                lambda: graph_walk(
                    conn, scope, entry=entry, budget=search.budget, fanout=s.graph_fanout,
                    spread=self.spread, matching=search.matching,
                ),
            )  # fmt: skip
        if not entry:
            found.note = f"no semantic match ≥ {s.graph_entry_similarity} to start from"
        return found
