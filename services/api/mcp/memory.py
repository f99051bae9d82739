"""One agent's memory as the MCP tools reach it: Memora's REST API through the typed client
(`memora_client`) with the caller's key; an error answer becomes a ToolError the model reads."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import httpx
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from memora_client import AsyncMemoraClient
from memora_client.errors import APIError, MemoraConnectionError
from memora_client.models import SearchableType, SearchResult

T = TypeVar("T")
# A tool call's own route runs through the app in-process; think waits for the LLM.
TIMEOUT = httpx.Timeout(180.0, connect=5.0)


@dataclass(frozen=True)
class Memory:
    agent_id: str
    client: AsyncMemoraClient  # carries the caller's credentials

    async def search(
        self,
        query: str,
        top_k: int,
        filters: dict[str, Any] | None = None,
        *,
        fact_type: list[SearchableType] | None = None,
        as_of: datetime | None = None,
        follow_up: bool = False,
    ) -> list[SearchResult]:
        call = self.client.search(
            self.agent_id, query, top_k, fact_type=fact_type, filters=filters, as_of=as_of,
            follow_up=follow_up,
        )  # fmt: skip
        found = await answer(call)
        return found.results


def connect(
    agent_id: str,
    base_url: str,
    *,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Memory:
    """The agent's memory at `base_url`. A tool call is one request: no retries (the model
    sees a 429 or a 503 and decides)."""
    client = AsyncMemoraClient(
        base_url, api_key, TIMEOUT, max_retries=0, headers=headers, transport=transport
    )
    return Memory(agent_id, client)


async def answer(pending: Awaitable[T]) -> T:
    """The call's typed answer; an error answer or a failed connection raises a ToolError."""
    try:
        return await pending
    except MemoraConnectionError as exc:
        cause = exc.__cause__ or exc
        raise ToolError(f"Memora is unreachable ({type(cause).__name__}); retry later") from exc
    except APIError as exc:
        raise ToolError(_describe(exc)) from exc


def as_sent(model: BaseModel) -> dict[str, Any]:
    """A typed answer as the API sent it: the fields it sent, as JSON values."""
    return model.model_dump(mode="json", exclude_unset=True)


def _describe(exc: APIError) -> str:
    response = exc.response
    if response is None:
        return str(exc)
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
