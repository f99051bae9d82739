"""The MCP tools of the memory lifecycle (seed 002 §4): remember, forget, restore, edit, recall,
reflect, evolve, link, the memory context of a turn and an entity's relations; registered with
the others (services.api.mcp.tools) when this module is imported."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from memora_client.models import EntityRelation
from services.api.mcp.memory import answer, as_sent
from services.api.mcp.tools import AsOf, Query, memory, tool

# ------------------------------------------------------------------ lifecycle (seed 002 §4)
MemoryId = Annotated[str, Field(pattern=r"^[0-9a-fA-F-]{36}$", description="a memory's id")]
Category = Annotated[
    str | None, Field(min_length=1, max_length=100, description='e.g. "preference", "fact"')
]


@tool("Remember a fact", read_only=False, idempotent=True)
async def remember(
    ctx: Context,
    content: Annotated[str, Field(min_length=1, max_length=10_000, description="the fact")],
    category: Category = None,
    importance: Annotated[
        float | None, Field(ge=1, le=10, description="1 (trivial) to 10 (crucial)")
    ] = None,
    related_to: Annotated[
        list[MemoryId] | None, Field(max_length=100, description="ids of related memories")
    ] = None,
) -> dict[str, Any]:
    """Remember one fact, checked against what you already know: the same fact is skipped, a
    near-duplicate merged, a changed one (a move, a new job, a new favourite) supersedes the
    old, which stays in history. Returns the decision and the memory ids it touched."""
    m = memory(ctx)
    decided = m.client.remember(
        m.agent_id, content, category=category, importance=importance, related_to=related_to or []
    )
    return as_sent(await answer(decided))


@tool("Forget", read_only=False, destructive=True, idempotent=True)
async def forget(
    ctx: Context,
    memory_id: Annotated[str | None, Field(pattern=r"^[0-9a-fA-F-]{36}$")] = None,
    query: Annotated[
        str | None, Field(min_length=1, max_length=2000, description="forget what matches this")
    ] = None,
    reason: Annotated[str | None, Field(max_length=1000)] = None,
    confirm: Annotated[
        bool, Field(description="with a query: true forgets; false (default) only lists")
    ] = False,
    dry_run: Annotated[bool, Field(description="only list what would be forgotten")] = False,
) -> dict[str, Any]:
    """Forget a memory by its id, or the memories matching a query. A query forgets nothing
    without confirm=true: the answer lists what would go (check it, then call again with
    confirm). Forgotten memories leave every search at once and can be restored for a while."""
    m = memory(ctx)
    # seed 002: a memory named by id is forgotten as asked; a query may match more than meant
    dry = dry_run or (query is not None and memory_id is None and not confirm)
    # confirm also lets a query forget more than the cap
    done = m.client.forget(
        m.agent_id, memory_id, query=query, reason=reason, dry_run=dry, confirm=confirm
    )
    return as_sent(await answer(done))


@tool("Edit a memory", read_only=False, idempotent=True)
async def edit(
    ctx: Context,
    memory_id: MemoryId,
    content: Annotated[str, Field(min_length=1, max_length=10_000, description="the new text")],
) -> dict[str, Any]:
    """Correct one of your memories: the new text becomes a new version that replaces it; the
    old one stays in its history and can be restored."""
    m = memory(ctx)
    return as_sent(await answer(m.client.edit(m.agent_id, memory_id, content)))


@tool("Restore a memory", read_only=False, idempotent=True)
async def restore(ctx: Context, memory_id: MemoryId) -> dict[str, Any]:
    """Bring back a memory that was forgotten (within the retention), archived or replaced."""
    m = memory(ctx)
    return await answer(m.client.restore(m.agent_id, memory_id))


@tool("Memory context for this turn", read_only=True, idempotent=True)
async def memory_context(
    ctx: Context,
    message: Annotated[
        str, Field(min_length=1, max_length=2000, description="the user's latest message")
    ],
    limit: Annotated[int, Field(ge=1, le=20, description="how many memories")] = 8,
) -> dict[str, Any]:
    """Call once a turn, before answering: what you remember that bears on the user's latest
    message, as a short block to read (newest facts first when they conflict), and the
    memories it came from."""
    found = await memory(ctx).search(message, limit)
    lines = [
        f"- [{r.event_date:%Y-%m-%d}] {r.text}" if r.event_date else f"- {r.text}"
        for r in sorted(found, key=lambda r: r.weight, reverse=True)
    ]
    return {
        "context": "\n".join(lines) if lines else "(nothing remembered about this)",
        "memories": [
            {"id": str(r.id), "text": r.text, "relevance": round(r.weight, 4)} for r in found
        ],
    }


@tool("Recall", read_only=False, idempotent=False)
async def recall(
    ctx: Context,
    query: Query,
    limit: Annotated[int, Field(ge=1, le=100, description="how many memories")] = 10,
    categories: Annotated[list[str] | None, Field(min_length=1, max_length=50)] = None,
    include_reflections: bool = True,
    as_of: AsOf = None,
    start: Annotated[datetime | None, Field(description="memories of events at or after")] = None,
    end: Annotated[datetime | None, Field(description="memories of events before")] = None,
) -> dict[str, Any]:
    """Recall memories the way a person does: relevant ones first, weighed with how recently
    you used them, how important they are and how often they come up; with start and end,
    those of that time; with as_of, those true then."""
    m = memory(ctx)
    window = (start, end) if start is not None or end is not None else None
    found = m.client.recall(
        m.agent_id, query, limit, time_range=window, categories=categories or None,
        include_reflections=include_reflections, as_of=as_of,
    )  # fmt: skip
    return as_sent(await answer(found))


@tool("Reflect", read_only=False, idempotent=False)
async def reflect(
    ctx: Context,
    topic: Annotated[str | None, Field(min_length=1, max_length=500)] = None,
    depth: Literal["shallow", "deep"] = "shallow",
) -> dict[str, Any]:
    """Think over your memories (of a topic, or recent ones) and store the insights as
    reflections linked to what they came from (uses the LLM)."""
    m = memory(ctx)
    return as_sent(await answer(m.client.reflect(m.agent_id, topic, depth=depth)))


@tool("Evolve memory now", read_only=False, idempotent=True)
async def evolve(ctx: Context) -> dict[str, Any]:
    """At the end of a conversation: consolidate your memories now (duplicates merged, changed
    facts superseded, reflection when due) instead of at the next hourly run. Returns the
    operation that runs it."""
    m = memory(ctx)
    return as_sent(await answer(m.client.evolve(m.agent_id)))


@tool("Link memories", read_only=False, idempotent=True)
async def link(
    ctx: Context,
    memory_id: MemoryId,
    related_memory_id: MemoryId,
    relationship: Annotated[
        str, Field(min_length=1, max_length=100, description='e.g. "caused_by", "same_person"')
    ] = "related_to",
) -> dict[str, Any]:
    """Link two of your memories with a typed relationship (both directions); later searches
    follow it."""
    m = memory(ctx)
    done = m.client.link(m.agent_id, memory_id, related_memory_id, relationship)
    return as_sent(await answer(done))


@tool("Relations of", read_only=True, idempotent=True)
async def relations(
    ctx: Context,
    name: Annotated[
        str, Field(min_length=1, max_length=200, description="a person, organisation or place")
    ],
) -> dict[str, Any]:
    """How someone or something you know of is related to others: where they live, work and
    study, their family, partner, friends, colleagues and managers, as read from your memories.
    Current relations first; each with its status (current, superseded, ended) and dates."""
    m = memory(ctx)
    found = await answer(m.client.entity(m.agent_id, name))
    return {"entity": found.canonical_name, "relations": [_relation(r) for r in found.relations]}


def _relation(r: EntityRelation) -> dict[str, Any]:
    until = r.valid_until.isoformat() if r.valid_until else None
    return {"relation": r.relation, "subject": r.subject.name, "object": r.object.name,
            "status": r.status, "since": r.valid_from.isoformat(), "until": until}  # fmt: skip
