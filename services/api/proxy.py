"""Forwarding of read routes from the write API to the query service.

Clients use the write API's port for everything (`memora serve`, docker compose; the
production Ingress sends it every path but `READ_PATHS`); it forwards these paths, the
ones that need the embedding model or the rerankers, to MEMORA_QUERY_URL, ahead of its own
routing (`QueryForwarder`). Every other path, reads that need no model included (the graph, one
memory in full), is the write API's own.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from services.api.errors import APIError, answer

READ_PATHS = (
    "search",
    "world_search",
    "agent_search",
    "opinion_search",
    "think",
    "conversation_search",
)
# Hop-by-hop headers (RFC 9110 §7.6.1): every other upstream header reaches the client as it
# came, the body's encoding and length included (the body is passed on undecoded).
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
NOT_SENT_UP = HOP_BY_HOP | {b"host"}


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


@dataclass(frozen=True)
class ForwardedRoute:
    """A forwarded path's template, the route label of the write API's metrics and log."""

    path_format: str


def _patterns() -> list[tuple[str, re.Pattern[str], ForwardedRoute]]:
    """(method, the path's pattern, its route) of every forwarded path."""
    pairs = [("POST", f"/{path}") for path in READ_PATHS] + list(LIFECYCLE_PATHS)
    return [
        (
            method,
            re.compile("/api" + re.sub(r"\{\w+\}", "[^/]+", template) + "$"),
            ForwardedRoute("/api" + template),
        )
        for method, template in pairs
    ]


_FORWARDED = _patterns()


def forwarded(method: str, path: str) -> ForwardedRoute | None:
    """The forwarded route `method path` is, if it is one."""
    if not path.startswith("/api/"):
        return None
    return next((r for m, p, r in _FORWARDED if m == method and p.match(path)), None)


class QueryForwarder:
    """The write API's ASGI middleware that sends the read paths to the query service as they
    came, ahead of the write API's routing: the request body streamed up, the answer streamed
    back with its headers as the query service gave them (which authenticates, rate-limits and
    limits bodies on its own). Added inside the body limit, the compression and the metrics, so
    the write API still applies those and counts and times every forwarded request. A query
    service that cannot be reached is a 503 `query_service_unavailable` with Retry-After."""

    def __init__(self, app: ASGIApp, query_url: str) -> None:
        self.app = app
        self.client = httpx.AsyncClient(
            base_url=query_url, timeout=httpx.Timeout(120.0, connect=5.0)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = forwarded(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = route
        request = self.client.build_request(
            scope["method"],
            httpx.URL(path=scope["path"], query=scope["query_string"]),
            headers=[(k, v) for k, v in scope["headers"] if k not in NOT_SENT_UP],
            content=_body(receive),
        )
        try:
            upstream = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            unavailable = APIError(
                503, "query_service_unavailable", f"query service unreachable: {exc}",
                headers={"Retry-After": "5"},
            )  # fmt: skip
            await answer(unavailable)(scope, receive, send)
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status_code,
                    "headers": [
                        (k, v) for k, v in upstream.headers.raw if k.lower() not in HOP_BY_HOP
                    ],
                }
            )
            async for chunk in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await upstream.aclose()


async def _body(receive: Receive) -> AsyncIterator[bytes]:
    """The request's body as it arrives."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return
