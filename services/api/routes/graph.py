"""The memory graph for the UI (seed 003 `GET /api/graph`) and single memories in full."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import AfterValidator, BaseModel, Field

from memora.basics.models import AGENT_ID_PATTERN, aware
from memora.retrieval.keyword import KeywordIndex
from memora.store import graph as store_graph
from memora.usecases import graph
from memora.usecases.graph import GraphRequest
from services.api import paging
from services.api.deps import ConnDep, ScopeDep
from services.api.errors import AUTH_ERRORS, error_responses

router = APIRouter(prefix="/api", tags=["graph"], responses=error_responses(*AUTH_ERRORS, 422, 503))
AgentPath = Annotated[str, Path(pattern=AGENT_ID_PATTERN)]
FactType = Literal["world", "agent", "opinion"]
LinkType = Literal["temporal", "semantic", "entity", "causes", "caused_by", "enables", "prevents"]
NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL
Moment = Annotated[datetime | None, AfterValidator(aware)]


class Node(BaseModel):
    id: UUID
    kind: Literal["unit", "entity"]
    label: str
    fact_type: FactType | None = None
    date: datetime | None = None
    entity_type: str | None = None
    mentions: int | None = None


class Edge(BaseModel):
    source: UUID
    target: UUID
    type: str = Field(description="a link type, or `mentions` (a unit → an entity it names)")
    weight: float


class Graph(BaseModel):
    agent_id: str
    nodes: list[Node]
    edges: list[Edge]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page of seeds")
    truncated: bool = Field(description="nodes or edges were left out to stay within the bounds")


class AgentSize(BaseModel):
    agent_id: str
    memories: int
    entities: int
    documents: int
    failed_operations: int


class AgentSizes(BaseModel):
    agents: list[AgentSize]


class Memory(BaseModel):
    id: UUID
    agent_id: str
    text: str
    context: str | None
    fact_type: FactType
    event_date: datetime
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime
    confidence_score: float | None
    metadata: dict[str, Any]
    created_at: datetime
    embedded: bool
    access_count: int
    document_id: str | None = Field(description="the source document (null: none, e.g. opinions)")
    item_index: int
    entities: list[dict[str, Any]]
    links: list[dict[str, Any]] = Field(description="its strongest outgoing links (50 at most)")


def _keyword_index(request: Request) -> KeywordIndex:
    state = request.app.state
    if not hasattr(state, "graph_keyword_index"):
        state.graph_keyword_index = KeywordIndex()
    index: KeywordIndex = state.graph_keyword_index
    return index


KeywordIndexDep = Annotated[KeywordIndex, Depends(_keyword_index)]


@router.get("/graph", response_model=Graph, responses=error_responses(404))
def get_graph(
    scope: ScopeDep,
    conn: ConnDep,
    index: KeywordIndexDep,
    agent_id: Annotated[str, Query(pattern=AGENT_ID_PATTERN)],
    limit: Annotated[int, Query(ge=1, le=store_graph.MAX_NODES)] = store_graph.DEFAULT_NODES,
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
    depth: Annotated[int, Query(ge=0, le=store_graph.MAX_DEPTH)] = 1,
    since: Moment = None,
    until: Moment = None,
) -> Response:
    """A bounded page of the agent's memory graph: units and entities with short labels, links
    with type and weight. Seeds: the newest units, or those naming `entity`, or the best
    keyword matches of `q`; then `depth` hops along each unit's strongest links. At most
    `limit` nodes (hard cap 2000) and 4 edges per node. Gzip-compressed when asked."""
    asked = GraphRequest(
        agent_id, limit, depth, tuple(dict.fromkeys(fact_type or [])),
        tuple(dict.fromkeys(link_type or [])), since, until, q, entity, paging.decode(cursor),
    )  # fmt: skip
    page = graph.memory_graph(conn, index, scope, asked)
    body = Graph(
        agent_id=agent_id,
        nodes=[Node.model_validate(n) for n in page.nodes],
        edges=[Edge.model_validate(e) for e in page.edges],
        next_cursor=paging.encode(page.next_cursor),
        truncated=page.truncated,
    )
    # serialised in one pass (pydantic-core), not again by FastAPI: the response_model stays
    # the documented schema
    return Response(body.model_dump_json(), media_type="application/json")


@router.get("/graph/agents", response_model=AgentSizes)
def agent_sizes(scope: ScopeDep, conn: ConnDep) -> AgentSizes:
    """The tenant's agents with their numbers of memories, entities, documents and failed
    operations (the UI's agent list)."""
    return AgentSizes(agents=[AgentSize.model_validate(r) for r in graph.agent_sizes(conn, scope)])


@router.get(
    "/agents/{agent_id}/memories/{memory_id}",
    response_model=Memory,
    responses=error_responses(404),
)
def get_memory(scope: ScopeDep, agent_id: AgentPath, memory_id: UUID, conn: ConnDep) -> Memory:
    """One memory unit in full: text, dates, entities, strongest links and source document."""
    return Memory.model_validate(graph.memory(conn, scope, agent_id, memory_id))
