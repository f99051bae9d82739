"""The MCP server over its two transports.

Streamable HTTP: `install(app)` adds `/mcp/{agent_id}` to the write API. Each HTTP request is
authenticated with the REST API's keys (services.api.auth) before the MCP layer sees it; the
tools then call the app's own routes in-process, through the typed client, with the same key,
so tenancy, validation and rate limits are the REST API's (a tool call counts as one request).
The server is stateless (no session affinity between API replicas) and answers in JSON.

stdio: `run_stdio(agent_id, api_url, api_key)`, behind `memora mcp --agent ID`: the same tools
against a Memora API over the network.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memora.basics.models import AGENT_ID_PATTERN
from services.api.auth import identify
from services.api.errors import APIError, error_body
from services.api.mcp import lifecycle_tools  # noqa: F401 - registers its tools
from services.api.mcp.memory import Memory, connect
from services.api.mcp.tools import Binder, MemoraMCP, register_all

INSTRUCTIONS = (
    "Your long-term memory. Call query_self, query_scene and query_background to learn who "
    "and where you are; query_character(name) for what you know about someone; query_memory "
    "to recall what was said (with turn numbers); search for anything else; retain to store "
    "something new."
)
INTERNAL_URL = "http://memora.internal"  # the app itself, reached in-process
_AGENT = re.compile(AGENT_ID_PATTERN)
_BINDING = "memora.mcp"  # where the endpoint leaves a request's Memory in its ASGI scope


def build_server(bind: Binder) -> MemoraMCP:
    server = MemoraMCP(bind, name="memora", instructions=INSTRUCTIONS, log_level="WARNING")
    register_all(server)
    return server


def _from_request(ctx: Context) -> Memory:
    request = ctx.request_context.request
    found: Memory = request.scope[_BINDING]  # type: ignore[union-attr]
    return found


def _credentials(request: Request) -> tuple[str | None, dict[str, str]]:
    auth, api_key = request.headers.get("authorization"), request.headers.get("x-api-key")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise APIError(
                401, "unauthorized", "the Authorization header must be `Bearer <API key>`"
            )
        return token, {"Authorization": auth}
    return api_key, ({"X-API-Key": api_key} if api_key else {})


class Endpoint:
    """`/mcp/{agent_id}`: authenticates, binds the agent, hands the request to the MCP layer.
    Its session manager and in-process transport live for one run of the app's lifespan (a
    session manager runs once; tests and servers may start the same app again); each request
    gets a client of its own with the caller's credentials."""

    def __init__(self, app: FastAPI, server: MemoraMCP) -> None:
        self.app, self.server = app, server
        self.manager: StreamableHTTPSessionManager | None = None
        self.transport: httpx.ASGITransport | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # Stateless JSON: any API replica answers any call. Our endpoint authenticates with API
        # keys; the SDK's Host/Origin checks (for unauthenticated local servers) are left off.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        async with manager.run():
            self.manager, self.transport = manager, httpx.ASGITransport(app=self.app)
            try:
                yield
            finally:
                self.manager, self.transport = None, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        agent_id = request.path_params["agent_id"]
        try:
            if self.manager is None or self.transport is None:
                raise APIError(503, "unavailable", "the MCP server is not running")
            if not _AGENT.match(agent_id):
                raise APIError(404, "not_found", f"no MCP server for agent id {agent_id!r}")
            key, headers = _credentials(request)
            await run_in_threadpool(identify, request, key)  # 401 before any MCP work
        except APIError as exc:
            response = JSONResponse(
                error_body(exc.code, exc.message, exc.details), exc.status, exc.headers
            )
            await response(scope, receive, send)
            return
        # The client holds nothing to release: its transport is the app itself.
        scope[_BINDING] = connect(agent_id, INTERNAL_URL, headers=headers, transport=self.transport)
        scope["path"], scope["root_path"] = "/", ""
        await self.manager.handle_request(scope, receive, send)


def install(app: FastAPI) -> Any:
    """Serve MCP at `/mcp/{agent_id}`; returns the lifespan context the app must enter."""
    endpoint = Endpoint(app, build_server(_from_request))
    app.router.routes.append(Route("/mcp/{agent_id}", endpoint, methods=["GET", "POST", "DELETE"]))
    return endpoint.running


def run_stdio(agent_id: str, api_url: str, api_key: str | None) -> None:
    binding = connect(agent_id, api_url, api_key=api_key)
    build_server(lambda ctx: binding).run("stdio")
