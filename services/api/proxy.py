"""Forwarding of read routes from the write API to the query service.

Clients use the write API's port for everything (`memora serve`, docker compose, and the
Kubernetes Ingress, which sends every path to the api Service); it forwards these paths, the
ones that need the embedding model or the rerankers, to MEMORA_QUERY_URL. Every other path,
reads that need no model included (the graph, one memory in full), is the write API's own.
"""

from __future__ import annotations

import httpx
from fastapi import APIRouter, Request, Response

from services.api.errors import APIError

READ_PATHS = (
    "search",
    "world_search",
    "agent_search",
    "opinion_search",
    "think",
    "conversation_search",
)
# Hop-by-hop headers (RFC 9110 §7.6.1) and those that describe the body as httpx received it
# (it decodes content-encoding); every other upstream header reaches the client unchanged.
NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
    }
)


def forwarded_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream answer's end-to-end headers (Retry-After included)."""
    return {k: v for k, v in headers.items() if k.lower() not in NOT_FORWARDED}


# The memory lifecycle's operations (they embed or rank, so they run where the model is):
# (method, path). Reading one memory (`GET /agents/{agent_id}/memories/{memory_id}`) is the
# write API's own route, not forwarded.
LIFECYCLE_PATHS = (
    *(
        ("POST", f"/agents/{{agent_id}}/{op}")
        for op in ("remember", "forget", "recall", "reflect", "link")
    ),
    ("POST", "/agents/{agent_id}/memories/{memory_id}/restore"),
    ("PATCH", "/agents/{agent_id}/memories/{memory_id}"),
)


def proxy_router(query_url: str) -> APIRouter:
    router = APIRouter(prefix="/api", include_in_schema=False)
    client = httpx.AsyncClient(base_url=query_url, timeout=httpx.Timeout(120.0, connect=5.0))

    async def forward(request: Request) -> Response:
        try:
            upstream = await client.request(
                request.method,
                request.url.path,
                content=await request.body(),
                headers={
                    k: v
                    for k, v in request.headers.items()
                    if k.lower() not in {"host", "content-length"}
                },
                params=request.query_params,
            )
        except httpx.HTTPError as exc:
            raise APIError(
                503,
                "query_service_unavailable",
                f"query service unreachable: {exc}",
                headers={"Retry-After": "5"},
            ) from exc
        return Response(
            upstream.content,
            status_code=upstream.status_code,
            headers=forwarded_headers(upstream.headers),
        )

    for path in READ_PATHS:
        router.add_api_route(f"/{path}", forward, methods=["POST"])
    for method, path in LIFECYCLE_PATHS:
        router.add_api_route(path, forward, methods=[method])
    return router
