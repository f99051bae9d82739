"""The memory graph for the UI (seed 003 `GET /api/graph`) and the agent list (a node in full:
`GET /api/agents/{agent_id}/memories/{id}`, services.api.routes.memories)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memora.basics.models import AGENT_ID_PATTERN
from memora.usecases import graph
from memora.usecases.graph import DEFAULT_NODES, MAX_DEPTH, MAX_NODES, GraphRequest
from services.api import paging
from services.api.deps import ContextDep, KeywordIndexDep, ReadConnDep, ScopeDep
from services.api.errors import AUTH_ERRORS, error_responses
from services.api.schemas.graph import (
    NO_NUL,
    AgentSize,
    AgentSizes,
    Edge,
    FactType,
    Graph,
    LinkType,
    Moment,
    Node,
)

router = APIRouter(prefix="/api", tags=["graph"], responses=error_responses(*AUTH_ERRORS, 422, 503))
JSON = "application/json"  # the documented schema is the response_model's


@router.get("/graph", response_model=Graph, responses=error_responses(404))
def get_graph(
    scope: ScopeDep,
    conn: ReadConnDep,
    context: ContextDep,
    index: KeywordIndexDep,
    response: Response,
    agent_id: Annotated[str, Query(pattern=AGENT_ID_PATTERN)],
    limit: Annotated[int, Query(ge=1, le=MAX_NODES)] = DEFAULT_NODES,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    fact_type: Annotated[list[FactType] | None, Query()] = None,
    link_type: Annotated[list[LinkType] | None, Query()] = None,
    q: Annotated[
        str | None, Query(max_length=500, pattern=NO_NUL, description="seed by a keyword search")
    ] = None,
    entity: Annotated[
        str | None,
        Query(max_length=300, pattern=NO_NUL, description="seed by an entity (id or name)"),
    ] = None,
    depth: Annotated[int, Query(ge=0, le=MAX_DEPTH)] = 1,
    since: Moment = None,
    until: Moment = None,
) -> Response:
    """A bounded page of the agent's memory graph (units, entities, typed weighted links) seeded
    by the newest units, those naming `entity` or the best keyword matches of `q`, then `depth`
    hops along their strongest links: `limit` nodes (cap 2000), 4 edges per node; gzipped."""
    asked = GraphRequest(
        agent_id, limit, depth, tuple(dict.fromkeys(fact_type or [])),
        tuple(dict.fromkeys(link_type or [])), since, until, q, entity, paging.decode(cursor),
    )  # fmt: skip
    page = graph.memory_graph(context, conn, index, scope, asked)
    body = Graph(
        agent_id=agent_id,
        nodes=[Node.model_validate(n) for n in page.nodes],
        edges=[Edge.model_validate(e) for e in page.edges],
        next_cursor=paging.encode(page.next_cursor),
        truncated=page.truncated,
    )
    # one pass (pydantic-core), not again by FastAPI; headers: the read source (ReadConnDep)
    return Response(body.model_dump_json(), media_type=JSON, headers=dict(response.headers))


@router.get("/graph/agents", response_model=AgentSizes)
def agent_sizes(scope: ScopeDep, conn: ReadConnDep, context: ContextDep) -> AgentSizes:
    """The tenant's agents with their numbers of memories, entities, documents and failed
    operations (the UI's agent list)."""
    return AgentSizes(
        agents=[AgentSize.model_validate(r) for r in graph.agent_sizes(context, conn, scope)]
    )
