"""The MCP tools. Adding one: a small async function here, decorated with `@tool(...)`, whose
docstring is its description for the model and whose annotated parameters are its JSON schema;
it gets the agent's `Memory` through `memory(ctx)` and calls one Memora route through the typed
client (`memory.answer(...)` turns an error answer into a ToolError).

Seed 001's fixed-query tools search the agent's own memories with a category filter and a
canonical query (nothing is stored twice under several query embeddings); their answers have
seed 001's shape: {"memories": [{"content", "relevance"[, "turn"]}]}.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from memora_client.models import MemoryItem, SearchResult
from services.api.mcp.memory import Memory, answer, as_sent

ToolFn = Callable[..., Coroutine[Any, Any, dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec:
    fn: ToolFn
    title: str
    annotations: ToolAnnotations


TOOLS: list[ToolSpec] = []


def tool(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> Callable[[ToolFn], ToolFn]:
    def register(fn: ToolFn) -> ToolFn:
        hints = ToolAnnotations(
            title=title,
            read_only_hint=read_only,
            destructive_hint=destructive,
            idempotent_hint=idempotent,
            open_world_hint=False,
        )
        TOOLS.append(ToolSpec(fn, title, hints))
        return fn

    return register


class Binder(Protocol):
    """How a server finds the agent (and credentials) of a tool call."""

    def __call__(self, ctx: Context) -> Memory: ...


class MemoraMCP(MCPServer):
    def __init__(self, bind: Binder, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bind = bind


def memory(ctx: Context) -> Memory:
    server = ctx.mcp_server
    assert isinstance(server, MemoraMCP)
    return server.bind(ctx)


# ------------------------------------------------------------------ parameter types
Query = Annotated[
    str, Field(min_length=1, max_length=2000, description="what to look for, in plain words")
]
TopK = Annotated[int, Field(ge=1, le=50, description="how many memories to return")]
Filters = Annotated[
    dict[str, Any] | None,
    Field(
        description='only memories whose metadata match, e.g. {"speaker": "Alice"}, '
        '{"turn": {"gte": 3, "lte": 9}}, {"type": "episodic"}, {"tags": {"any": ["x"]}}, '
        '{"time": {"start": "2024-01-01T00:00:00Z"}}'
    ),
]
Name = Annotated[str, Field(min_length=1, max_length=200, description="the character's name")]
AsOf = Annotated[
    datetime | None,
    Field(
        description="what was true at this time (ISO 8601), facts replaced since included; "
        "default: what is true now"
    ),
]


def _memories(results: list[SearchResult], *, turns: bool = False) -> list[dict[str, Any]]:
    out = []
    for r in results:
        entry: dict[str, Any] = {"content": r.text, "relevance": round(r.weight, 4)}
        turn = (r.metadata or {}).get("turn")
        if turns and turn is not None:
            entry["turn"] = str(turn)
        out.append(entry)
    return out


# ------------------------------------------------------------------ general tools
UpdateMode = Annotated[
    Literal["replace", "append"],
    Field(
        description='"append": add this as the next message of the conversation document_id '
        "(only what is new is processed; the same message again is skipped)"
    ),
]
MessageIdParam = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=200,
        description="the message's id in its conversation (append), for safe retries",
    ),
]

DocumentIdParam = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=256,
        description="a stable id: storing the same id again replaces it (idempotent); "
        'with update_mode "append", the conversation to add this message to',
    ),
]
Temporary = Annotated[
    bool,
    Field(
        description="a temporary chat: the message is kept (and found by conversation search) "
        "but nothing is remembered from it"
    ),
]


@tool("Remember", read_only=False, idempotent=False)
async def retain(
    ctx: Context,
    content: Annotated[str, Field(min_length=1, max_length=50_000, description="what to remember")],
    context: Annotated[
        str | None, Field(max_length=2000, description="where it comes from, optional")
    ] = None,
    event_date: Annotated[
        datetime | None, Field(description="when it happened (ISO 8601); default now")
    ] = None,
    metadata: Annotated[
        dict[str, str | int | float | bool | list[str]] | None,
        Field(description='flat key-value labels to filter on later, e.g. {"topic": "work"}'),
    ] = None,
    document_id: DocumentIdParam = None,
    update_mode: UpdateMode = "replace",
    speaker: Annotated[str | None, Field(max_length=200, description="who said it")] = None,
    message_id: MessageIdParam = None,
    temporary: Temporary = False,
) -> dict[str, Any]:
    """Store something in your long-term memory (a message, a conversation, a fact). Returns
    at once with an operation id; the memory becomes searchable a moment later."""
    m = memory(ctx)
    item = MemoryItem(content=content, context=context, event_date=event_date,
                      metadata=dict(metadata or {}), speaker=speaker or None,
                      message_id=message_id or None)  # fmt: skip
    accepted = await answer(
        m.client.store_batch(
            m.agent_id, [item], document_id, update_mode=update_mode, temporary=temporary
        )
    )
    stored = as_sent(accepted)
    keys = ("operation_id", "document_id", "status", "messages_new", "messages_existing")
    return {k: stored[k] for k in keys if stored.get(k) is not None}


@tool("Search memory", read_only=True, idempotent=True)
async def search(
    ctx: Context,
    query: Query,
    top_k: TopK = 10,
    fact_types: Annotated[
        list[Literal["world", "agent", "opinion", "reflection"]] | None,
        Field(
            min_length=1,
            description="networks: world facts, your experiences, opinions, reflections "
            "(insights drawn from your memories); default: the first three",
        ),
    ] = None,
    filters: Filters = None,
    as_of: AsOf = None,
    follow_up: Annotated[
        bool,
        Field(
            description="a second round the server's LLM plans from the first results, for "
            "questions needing two memories (slower; the server needs an LLM)"
        ),
    ] = False,
) -> dict[str, Any]:
    """Search your long-term memory: facts, experiences and opinions relevant to the query,
    best first, each with its relevance, date and metadata; with as_of, what was true then."""
    results = await memory(ctx).search(
        query, top_k, filters, fact_type=fact_types, as_of=as_of, follow_up=follow_up
    )
    return {"query": query, "memories": [_found(as_sent(r)) for r in results]}


def _found(hit: dict[str, Any]) -> dict[str, Any]:
    """One search result as `search` answers it."""
    return {
        "id": hit["id"],
        "content": hit["text"],
        "relevance": round(hit["weight"], 4),
        "fact_type": hit["fact_type"],
        "event_date": hit["event_date"],
        "metadata": hit.get("metadata") or {},
    }


@tool("Think", read_only=False, idempotent=False)
async def think(
    ctx: Context,
    query: Query,
    context: Annotated[
        str | None, Field(max_length=5000, description="the situation you are in, optional")
    ] = None,
    as_of: AsOf = None,
) -> dict[str, Any]:
    """Answer a question as yourself, from your memories and personality (uses the LLM); with
    as_of, from what was true then. The opinions the answer forms are stored in the background
    (their operation id is returned)."""
    m = memory(ctx)
    thought = as_sent(await answer(m.client.think(m.agent_id, query, context=context, as_of=as_of)))
    return {
        "answer": thought["text"],
        "new_opinions": [o["statement"] for o in thought["new_opinions"]],
        "opinions_operation_id": thought.get("opinions_operation_id"),
    }


# ------------------------------------------------------------------ seed 001 tools
# Seed 001's fixed queries: (canonical query, top k, filter). `{name}`: query_character's name.
FIXED: dict[str, tuple[str, int, dict[str, Any]]] = {
    "query_self": ("who am I?", 5, {"type": "character", "category": "identity"}),
    "query_background": (
        "what is my background?",
        5,
        {"type": "character", "category": "background"},
    ),
    "query_communication_style": (
        "how do I communicate?",
        3,
        {"type": "character", "category": "communication"},
    ),
    "query_scene": ("where am I?", 5, {"type": "scene"}),
    "query_character": ("who is {name}?", 3, {"type": "character_knowledge", "about": "{name}"}),
}


async def _fixed(ctx: Context, tool_name: str, name: str = "") -> dict[str, Any]:
    query, top_k, filters = FIXED[tool_name]
    named = {k: v.replace("{name}", name) if isinstance(v, str) else v for k, v in filters.items()}
    found = await memory(ctx).search(query.replace("{name}", name), top_k, named)
    return {"memories": _memories(found)}


@tool("Who am I", read_only=True, idempotent=True)
async def query_self(ctx: Context) -> dict[str, Any]:
    """Retrieve your core identity: who you are, your role and personality."""
    return await _fixed(ctx, "query_self")


@tool("My background", read_only=True, idempotent=True)
async def query_background(ctx: Context) -> dict[str, Any]:
    """Retrieve your personal history and background."""
    return await _fixed(ctx, "query_background")


@tool("How I communicate", read_only=True, idempotent=True)
async def query_communication_style(ctx: Context) -> dict[str, Any]:
    """Learn how you communicate and interact with others."""
    return await _fixed(ctx, "query_communication_style")


@tool("Where am I", read_only=True, idempotent=True)
async def query_scene(ctx: Context) -> dict[str, Any]:
    """Understand where you are: the location, atmosphere, time and situation."""
    return await _fixed(ctx, "query_scene")


@tool("Who is", read_only=True, idempotent=True)
async def query_character(ctx: Context, name: Name) -> dict[str, Any]:
    """Learn what you know about another character in the simulation."""
    return await _fixed(ctx, "query_character", name)


@tool("What happened", read_only=True, idempotent=True)
async def query_memory(ctx: Context, query: Query) -> dict[str, Any]:
    """Search your memories of what has happened and been said during the simulation; each
    memory comes with the turn it happened in."""
    results = await memory(ctx).search(query, 5, {"type": "episodic"})
    return {"query": query, "memories": _memories(results, turns=True)}


# ------------------------------------------------------------------ conversations (seed 002 §7)
@tool("Search conversations", read_only=True, idempotent=True)
async def conversation_search(
    ctx: Context,
    query: Query,
    limit: Annotated[int, Field(ge=1, description="how many messages (default 5, max 20)")] = 5,
    document_id: Annotated[
        str | None, Field(min_length=1, max_length=256, description="one conversation only")
    ] = None,
    roles: Annotated[
        list[Literal["user", "assistant", "system", "tool"]] | None,
        Field(min_length=1, description="only messages of these roles"),
    ] = None,
    channel: Annotated[
        str | None, Field(min_length=1, max_length=64, description="only messages said there")
    ] = None,
    start: Annotated[datetime | None, Field(description="messages sent at or after")] = None,
    end: Annotated[datetime | None, Field(description="messages sent before")] = None,
    min_score: Annotated[
        float | None, Field(ge=0, le=1, description="least similarity, 0-1 (default 0.5)")
    ] = None,
    highlight: Annotated[
        bool | None, Field(description="mark the words the query matched in each snippet")
    ] = None,
) -> dict[str, Any]:
    """Search the raw messages of past conversations (what was actually said, word for word),
    not the facts extracted from them. Each result: conversation id and title, message id,
    role, time, a snippet and its score."""
    m = memory(ctx)
    window = (start, end) if start is not None or end is not None else None
    found = m.client.conversation_search(
        m.agent_id, query, limit, conversation_id=document_id, time_range=window, roles=roles,
        min_score=min_score, highlight=highlight, channel=channel,
    )  # fmt: skip
    return as_sent(await answer(found))


def register_all(server: MCPServer) -> None:
    for spec in TOOLS:
        server.add_tool(
            spec.fn,
            name=spec.fn.__name__,
            title=spec.title,
            description=inspect.cleandoc(spec.fn.__doc__ or ""),
            annotations=spec.annotations,
            structured_output=True,
        )
