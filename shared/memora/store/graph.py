"""The memory graph for the UI: a bounded subgraph of one agent, labels only.

A page starts from seed units (the agent's newest, those that mention an entity, or the best
keyword matches of a text), follows each unit's strongest links `depth` hops out, and adds
the entities the page's units mention most. Everything is bounded: nodes by `limit` (a fifth
of it kept for entities), links followed by FANOUT per unit and hop, edges by EDGES_PER_NODE
per node (the strongest). Nodes carry a short label; a memory in full is
`lifecycle.memory_detail` (the memory's view).

Paging walks the seeds: the cursor is the last seed's (event_date, id) for the recency and
entity seeds, and an offset into the ranked matches for a text. Nodes reached by links may
appear again on later pages; clients merge by id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.rows import tuple_row

from memora.nlp.names import normalize_name
from memora.store import relations

MAX_NODES = 2000
DEFAULT_NODES = 500
MAX_DEPTH = 3
FANOUT = 8
EDGES_PER_NODE = 4
LABEL_CHARS = 80
SYMMETRIC = ("temporal", "semantic", "entity")

Cursor = tuple[datetime, UUID] | int


@dataclass(frozen=True)
class RankedSeeds:
    """A page's share of ranked seeds (a text's best keyword matches, best first), with its
    offset into the ranking and whether more may follow."""

    ids: list[str]
    offset: int
    more: bool


@dataclass(frozen=True)
class GraphQuery:
    agent_key: str
    limit: int = DEFAULT_NODES
    depth: int = 1
    fact_types: tuple[str, ...] = ()
    link_types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def unit_filter(self, alias: str = "u") -> tuple[str, dict[str, Any]]:
        """SQL conditions (after `WHERE`) and parameters restricting units of the agent."""
        sql = [f"{alias}.agent_id = %(agent)s"]
        if self.fact_types:
            sql.append(f"{alias}.fact_type = ANY(%(fact_types)s)")
        if self.since is not None:
            sql.append(f"{alias}.event_date >= %(since)s")
        if self.until is not None:
            sql.append(f"{alias}.event_date < %(until)s")
        params = {
            "agent": self.agent_key,
            "fact_types": list(self.fact_types),
            "since": self.since,
            "until": self.until,
        }
        return " AND ".join(sql), params


@dataclass
class GraphPage:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    next_cursor: Cursor | None = None
    truncated: bool = False  # nodes or edges were left out to stay within the bounds


_UNIT_COLUMNS = "u.id::text AS id, left(u.text, %(label)s) AS label, u.fact_type, u.event_date"


def seed_count(q: GraphQuery) -> int:
    """Seeds per page: all of the unit budget (four fifths of the nodes) without hops, else
    half of it (room for neighbours)."""
    unit_budget = q.limit - q.limit // 5
    return unit_budget if q.depth == 0 else max(1, unit_budget // 2)


def _page_filter(q: GraphQuery, after: tuple[datetime, UUID] | None) -> tuple[str, dict[str, Any]]:
    """The query's unit filter, past the keyset `after` = (event_date, id) of the last seed."""
    where, params = q.unit_filter()
    if after is not None:
        where += " AND (u.event_date, u.id) < (%(after_date)s, %(after_id)s)"
        params |= {"after_date": after[0], "after_id": after[1]}
    return where, params


def _recent_seeds(
    conn: Connection[Any], q: GraphQuery, after: tuple[datetime, UUID] | None, n: int
) -> list[dict[str, Any]]:
    where, params = _page_filter(q, after)
    return conn.execute(
        f"SELECT {_UNIT_COLUMNS} FROM memory_units u WHERE {where} "
        "ORDER BY u.event_date DESC, u.id DESC LIMIT %(n)s",
        params | {"n": n, "label": LABEL_CHARS},
    ).fetchall()


def _entity_seeds(
    conn: Connection[Any],
    q: GraphQuery,
    entity_id: UUID,
    after: tuple[datetime, UUID] | None,
    n: int,
) -> list[dict[str, Any]]:
    where, params = _page_filter(q, after)
    return conn.execute(
        f"SELECT {_UNIT_COLUMNS} FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id "
        f"WHERE ue.entity_id = %(entity)s AND {where} "
        "ORDER BY u.event_date DESC, u.id DESC LIMIT %(n)s",
        params | {"entity": entity_id, "n": n, "label": LABEL_CHARS},
    ).fetchall()


def _ranked_seeds(
    conn: Connection[Any], q: GraphQuery, ranked: RankedSeeds
) -> list[dict[str, Any]]:
    rows = _units(conn, q, ranked.ids)
    order = {unit_id: i for i, unit_id in enumerate(ranked.ids)}
    rows.sort(key=lambda r: order[r["id"]])
    return rows


def _units(conn: Connection[Any], q: GraphQuery, ids: list[str]) -> list[dict[str, Any]]:
    if not ids:
        return []
    where, params = q.unit_filter()
    return conn.execute(
        f"SELECT {_UNIT_COLUMNS} FROM memory_units u WHERE u.id = ANY(%(ids)s::uuid[]) AND {where}",
        params | {"ids": ids, "label": LABEL_CHARS},
    ).fetchall()


# Unit and entity ids are handled as text here: a page holds thousands of them, and strings
# hash and compare far faster than uuid.UUID objects (same order: canonical lower-case hex).
Link = tuple[str, str, str, float]  # from, to, type, weight


def _links_from(conn: Connection[Any], q: GraphQuery, ids: list[str]) -> dict[str, list[Link]]:
    """Every link out of these units, strongest first per unit, read from the links index
    alone (idx_memory_links_strongest holds from, weight, to and type)."""
    type_filter = "AND l.link_type = ANY(%(types)s)" if q.link_types else ""
    out: dict[str, list[Link]] = {unit: [] for unit in ids}
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(
            f"""
            SELECT l.from_unit::text, l.to_unit::text, l.link_type, l.weight
            FROM unnest(%(ids)s::uuid[]) AS f(id)
            JOIN memory_links l ON l.from_unit = f.id {type_filter}
            ORDER BY l.from_unit, l.weight DESC
            """,
            {"ids": ids, "types": list(q.link_types)},
        )
        for link in cur.fetchall():
            out[link[0]].append(link)
    return out


def _strongest_targets(links: dict[str, list[Link]], frontier: list[str]) -> list[str]:
    """The targets of each frontier unit's FANOUT strongest links, strongest first."""
    chosen = [link for unit in frontier for link in links[unit][:FANOUT]]
    chosen.sort(key=lambda link: -link[3])
    return list(dict.fromkeys(link[1] for link in chosen))


def _edges(links: dict[str, list[Link]], units: set[str], cap: int) -> tuple[list[Link], bool]:
    """Links among the units, strongest first, at most `cap`; a symmetric pair counts once.
    And whether some were left out."""
    kept = [
        link
        for out in links.values()
        for link in out
        if link[1] in units and (link[2] not in SYMMETRIC or link[0] < link[1])
    ]
    kept.sort(key=lambda link: -link[3])
    return kept[:cap], len(kept) > cap


def _entities(
    conn: Connection[Any], agent_key: str, ids: list[str], n: int, must: UUID | None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The `n` entities the units mention most (`must` first), and their mention edges."""
    with conn.cursor(row_factory=tuple_row) as cur:
        pairs: list[tuple[str, str]] = cur.execute(
            "SELECT unit_id::text, entity_id::text FROM unit_entities "
            "WHERE unit_id = ANY(%s::uuid[])",
            (ids,),
        ).fetchall()
    counts = Counter(entity for _, entity in pairs)
    first = str(must) if must is not None else None
    top = sorted(counts, key=lambda e: (e != first, -counts[e], e))[:n]
    if not top:
        return [], []
    chosen = conn.execute(
        "SELECT id::text AS id, canonical_name AS label, entity_type, mention_count FROM entities "
        "WHERE id = ANY(%s::uuid[]) AND agent_id = %s",
        (top, agent_key),
    ).fetchall()
    order = {entity: i for i, entity in enumerate(top)}
    chosen.sort(key=lambda e: order[e["id"]])
    kept = {e["id"] for e in chosen}
    return chosen, [(unit, entity) for unit, entity in pairs if entity in kept]


def find_entity(conn: Connection[Any], agent_key: str, entity: str) -> dict[str, Any] | None:
    """An entity of the agent by id, or by name (exact, then case-insensitive or one of its
    aliases, most mentioned). Each way through an index of its own (the primary key, the
    agent's normalised names, the aliases' GIN): an entity's normalised name is its canonical
    name's (`normalize_name`), so the exact name needs no test of its own to be found."""
    try:
        as_id: UUID | None = UUID(entity)
    except ValueError:
        as_id = None
    name, key = entity.strip(), normalize_name(entity)
    return conn.execute(
        FIND_ENTITY,
        {"agent": agent_key, "id": as_id, "name": name, "key": key, "names": [name.lower(), key]},
        prepare=False,  # planned for the agent's size, as entity resolution's lookups
    ).fetchone()


FIND_ENTITY = """
    SELECT id, canonical_name, entity_type FROM entities
    WHERE (agent_id = %(agent)s AND id = %(id)s)
       OR (agent_id = %(agent)s AND normalized_name = ANY(%(names)s::text[]))
       OR (agent_id = %(agent)s AND aliases @> ARRAY[%(key)s]::text[])
    ORDER BY (id = %(id)s) DESC NULLS LAST, (canonical_name = %(name)s) DESC,
             mention_count DESC
    LIMIT 1
    """


def subgraph(
    conn: Connection[Any],
    q: GraphQuery,
    *,
    cursor: tuple[datetime, UUID] | None = None,
    ranked: RankedSeeds | None = None,
    entity_id: UUID | None = None,
) -> GraphPage:
    """One page of the agent's graph (see the module docstring): from `ranked` seeds (the
    caller ranks a text's matches: `seed_count` of them per page), else the newest units
    (of `entity_id`), after `cursor`."""
    entity_budget = q.limit // 5
    page = GraphPage()
    seeds = _page_seeds(conn, q, page, cursor, ranked, entity_id)
    units, links = _expand(conn, q, page, seeds, q.limit - entity_budget)
    ids = list(units)
    edges, cut = _edges(links, set(ids), EDGES_PER_NODE * len(ids))
    page.truncated = page.truncated or cut
    page.nodes = [
        {
            "id": r["id"],
            "kind": "unit",
            "label": r["label"],
            "fact_type": r["fact_type"],
            "date": r["event_date"],
        }
        for r in units.values()
    ]
    page.edges = [
        {"source": a, "target": b, "type": kind, "weight": round(weight, 3)}
        for a, b, kind, weight in edges
    ]
    if ids and entity_budget:
        _add_entities(conn, q, page, ids, entity_budget, entity_id)
    return page


def _page_seeds(
    conn: Connection[Any],
    q: GraphQuery,
    page: GraphPage,
    cursor: tuple[datetime, UUID] | None,
    ranked: RankedSeeds | None,
    entity_id: UUID | None,
) -> list[dict[str, Any]]:
    """The page's seed units; sets its `next_cursor` when more follow."""
    n_seeds = seed_count(q)
    if ranked is not None:
        page.next_cursor = ranked.offset + n_seeds if ranked.more else None
        return _ranked_seeds(conn, q, ranked)
    if entity_id is not None:
        seeds = _entity_seeds(conn, q, entity_id, cursor, n_seeds + 1)
    else:
        seeds = _recent_seeds(conn, q, cursor, n_seeds + 1)
    if len(seeds) > n_seeds:
        seeds = seeds[:n_seeds]
        page.next_cursor = (seeds[-1]["event_date"], UUID(seeds[-1]["id"]))
    return seeds


def _expand(
    conn: Connection[Any],
    q: GraphQuery,
    page: GraphPage,
    seeds: list[dict[str, Any]],
    unit_budget: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[Link]]]:
    """The seeds and the units their strongest links reach, `q.depth` hops out, within the
    budget (the page is `truncated` when some were left out); with the links of them all."""
    units = {r["id"]: r for r in seeds}
    links = _links_from(conn, q, list(units))
    frontier = list(units)
    for _ in range(q.depth):
        if not frontier or len(units) >= unit_budget:
            break
        fresh = [u for u in _strongest_targets(links, frontier) if u not in units]
        room = unit_budget - len(units)
        page.truncated = page.truncated or len(fresh) > room
        found = _units(conn, q, fresh[:room])
        units.update((r["id"], r) for r in found)
        frontier = [r["id"] for r in found]
        # the links of the new units: to expand them next, and for the edges among all
        links.update(_links_from(conn, q, frontier))
    return units, links


def _add_entities(
    conn: Connection[Any],
    q: GraphQuery,
    page: GraphPage,
    ids: list[str],
    entity_budget: int,
    entity_id: UUID | None,
) -> None:
    """The entities the page's units mention, as nodes, and their mentions and current
    relations as edges."""
    ents, mentions = _entities(conn, q.agent_key, ids, entity_budget, entity_id)
    page.nodes += [
        {
            "id": e["id"],
            "kind": "entity",
            "label": e["label"],
            "entity_type": e["entity_type"],
            "mentions": e["mention_count"],
        }
        for e in ents
    ]
    page.edges += [
        {"source": unit, "target": entity, "type": "mentions", "weight": 1.0}
        for unit, entity in mentions
    ]
    # the current relations among them (works_at, sibling_of...): subject → object
    page.edges += [
        {"source": r["subject_id"], "target": r["object_id"], "type": "relation",
         "weight": 1.0, "relation": r["relation"]}
        for r in relations.between(conn, [e["id"] for e in ents], limit=4 * len(ents))
    ]  # fmt: skip


def agent_sizes(conn: Connection[Any], tenant_id: str, limit: int = 1000) -> list[dict[str, Any]]:
    """The tenant's agents (stored keys) with their numbers of memories, entities, documents
    and failed operations: the UI's agent list."""
    return conn.execute(
        """
        SELECT a.agent_id,
               (SELECT count(*) FROM memory_units u WHERE u.agent_id = a.agent_id) AS memories,
               (SELECT count(*) FROM entities e WHERE e.agent_id = a.agent_id) AS entities,
               (SELECT count(*) FROM documents d WHERE d.agent_id = a.agent_id) AS documents,
               (SELECT count(*) FROM operations o
                WHERE o.agent_id = a.agent_id AND o.status = 'failed') AS failed_operations
        FROM agents a WHERE a.tenant_id = %s ORDER BY a.agent_id LIMIT %s
        """,
        (tenant_id, limit),
    ).fetchall()
