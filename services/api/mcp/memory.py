"""One agent's memory as the MCP tools reach it: Memora's REST API with the caller's key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from mcp.server.mcpserver.exceptions import ToolError


@dataclass(frozen=True)
class Memory:
    agent_id: str
    http: httpx.AsyncClient
    headers: dict[str, str]  # the caller's credentials, passed on

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The route's JSON answer; an error answer becomes a ToolError the model can read."""
        try:
            response = await self.http.request(method, path, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            raise ToolError(f"Memora is unreachable ({type(exc).__name__}); retry later") from exc
        if response.status_code >= 400:
            raise ToolError(_describe(response))
        return response.json()

    async def search(
        self, query: str, top_k: int, filters: dict[str, Any] | None = None, **extra: Any
    ) -> list[dict[str, Any]]:
        body = {"agent_id": self.agent_id, "query": query, "top_k": top_k, "filters": filters}
        found = await self.call("POST", "/api/search", body | extra)
        results: list[dict[str, Any]] = found["results"]
        return results


def _describe(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return f"Memora answered HTTP {response.status_code}"
    message = f"{error.get('message', 'error')} ({error.get('code', response.status_code)})"
    details = error.get("details")
    if isinstance(details, list):  # validation errors: where and what
        problems = [
            f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}"
            for d in details[:5]
            if isinstance(d, dict)
        ]
        message += ": " + "; ".join(problems)
    return message
