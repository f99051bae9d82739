"""Read routes: /api/search and the per-network variants (seed 003 "Search Memories")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from memora.models import AgentId
from services.api.deps import ConnDep

router = APIRouter(prefix="/api", tags=["search"])
FactType = Literal["world", "agent", "opinion"]


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[str, Field(min_length=1, max_length=2000)]
    fact_type: list[FactType] | None = None
    thinking_budget: Annotated[int, Field(ge=1, le=1000)] = 100
    top_k: Annotated[int, Field(ge=1, le=200)] = 10
    reranker: Literal["heuristic", "cross-encoder"] = "heuristic"
    trace: bool = False


class SearchResult(BaseModel):
    id: UUID
    text: str
    context: str | None = None
    event_date: datetime | None = None
    weight: float
    fact_type: FactType
    metadata: dict[str, Any] | None = None


class SearchResponse(BaseModel):
    results: list[SearchResult]
    trace: dict[str, Any] | None = None


def _search(request: Request, body: SearchRequest, conn: ConnDep) -> SearchResponse:
    """Semantic and full-text search fused with RRF (k = 60)."""
    embedder = request.app.state.embedder
    vector = embedder.embed_one(body.query)
    types = body.fact_type or ["world", "agent", "opinion"]
    rows = conn.execute(
        """
        WITH sem AS (
            SELECT id, row_number() OVER (ORDER BY embedding <=> %(v)s) AS r FROM (
                SELECT id, embedding FROM memory_units
                WHERE agent_id = %(a)s AND fact_type = ANY(%(t)s) AND embedding IS NOT NULL
                ORDER BY embedding <=> %(v)s LIMIT 50) s
        ), kw AS (
            SELECT id, row_number() OVER (ORDER BY ts_rank_cd(search_vector, q) DESC) AS r
            FROM memory_units, websearch_to_tsquery('english', %(q)s) q
            WHERE agent_id = %(a)s AND fact_type = ANY(%(t)s) AND search_vector @@ q LIMIT 50
        ), fused AS (
            SELECT id, sum(1.0 / (60 + r)) AS score FROM (
                SELECT * FROM sem UNION ALL SELECT * FROM kw) x GROUP BY id
        )
        SELECT u.id, u.text, u.context, u.event_date, u.fact_type, u.metadata, f.score AS weight
        FROM fused f JOIN memory_units u ON u.id = f.id
        ORDER BY f.score DESC LIMIT %(k)s
        """,
        {"v": vector, "a": body.agent_id, "t": types, "q": body.query, "k": body.top_k},
    ).fetchall()
    return SearchResponse(results=[SearchResult.model_validate(r) for r in rows])


@router.post("/search", response_model=SearchResponse)
def search(request: Request, body: SearchRequest, conn: ConnDep) -> SearchResponse:
    return _search(request, body, conn)
