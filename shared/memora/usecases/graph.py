"""The memory graph for the UI (seed 003 `GET /api/graph`) and the agent list with sizes (a
memory in full, the node a client clicks: `memora.lifecycle.memory.view`). Pages are bounded
and seeded by recency, an entity, or a text's best keyword matches (ranked here by the keyword
retriever; `store.graph` builds the page)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Invalid, NotFound
from memora.basics.models import FACT_TYPES
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.retrieval.arms.keyword import KeywordIndex
from memora.retrieval.types import SearchScope
from memora.store import graph
from memora.store.graph import GraphPage, GraphQuery, RankedSeeds

MAX_NODES, DEFAULT_NODES, MAX_DEPTH = graph.MAX_NODES, graph.DEFAULT_NODES, graph.MAX_DEPTH
MAX_TEXT_SEEDS = 2000  # a text seeds at most this many matches, over all pages
KEYWORD_MATCH_BUDGET = 1000  # as the keyword retriever (MEMORA_KEYWORD_MATCH_BUDGET)


@dataclass(frozen=True)
class GraphRequest:
    agent_id: str  # as the client names it
    limit: int = graph.DEFAULT_NODES
    depth: int = 1
    fact_types: tuple[str, ...] = ()
    link_types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None  # seed by a keyword search
    entity: str | None = None  # seed by an entity (id or name)
    position: tuple[datetime, UUID] | int | None = None  # from the previous page's cursor


def memory_graph(
    app: AppContext, conn: Connection[Any], index: KeywordIndex, scope: Scope, request: GraphRequest
) -> GraphPage:
    """One bounded page of the agent's memory graph (see `store.graph`)."""
    r = request
    if r.text is not None and r.entity is not None:
        raise Invalid("conflicting_seeds", "pass `q` or `entity`, not both")
    key = scope.key(r.agent_id)
    entity_id = None
    if r.entity is not None:
        found = graph.find_entity(conn, key, r.entity)
        if found is None:
            raise NotFound("not_found", f"entity {r.entity!r} not found for agent {r.agent_id}")
        entity_id = found["id"]
    if r.position is not None and isinstance(r.position, int) != bool(r.text):
        raise Invalid("invalid_cursor", "the cursor belongs to another kind of seed")
    q = GraphQuery(key, r.limit, r.depth, r.fact_types, r.link_types, r.since, r.until)
    text = r.text.strip() if r.text else None
    if text:
        offset = r.position if isinstance(r.position, int) else 0
        return graph.subgraph(
            conn, q, ranked=keyword_seeds(app, conn, index, scope, q, text, offset)
        )
    after = r.position if isinstance(r.position, tuple) else None
    return graph.subgraph(conn, q, cursor=after, entity_id=entity_id)


def keyword_seeds(
    app: AppContext,
    conn: Connection[Any],
    index: KeywordIndex,
    scope: Scope,
    q: GraphQuery,
    text: str,
    offset: int,
) -> RankedSeeds:
    """The page's share of the text's best keyword (BM25) matches."""
    terms = index.terms(conn, text)
    if not terms or offset >= MAX_TEXT_SEEDS:
        return RankedSeeds([], offset, more=False)
    stats = index.stats(conn, q.agent_key, terms)
    wanted = min(offset + graph.seed_count(q), MAX_TEXT_SEEDS)
    within = SearchScope(scope.tenant_id, q.agent_key, q.fact_types or FACT_TYPES)
    ranked = index.search(
        conn, within, stats=stats, limit=wanted, match_budget=KEYWORD_MATCH_BUDGET
    )
    ids = [str(unit_id) for unit_id, _ in ranked[offset:wanted]]
    return RankedSeeds(ids, offset, more=len(ranked) == wanted and wanted < MAX_TEXT_SEEDS)


def agent_sizes(app: AppContext, conn: Connection[Any], scope: Scope) -> list[dict[str, Any]]:
    """The tenant's agents, as its client names them, with their numbers of memories,
    entities, documents and failed operations (the UI's agent list)."""
    rows = graph.agent_sizes(conn, scope.tenant_id)
    for row in rows:
        row["agent_id"] = scope.agent_id(row["agent_id"])
    return rows
