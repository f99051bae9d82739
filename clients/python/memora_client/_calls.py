"""What the sync and async clients share: each API call as a `Call` (method, path, body, how to
read the answer), and the headers (the retry policy: `_retries`). No input or output happens
here."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeAlias, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
from pydantic import BaseModel

from memora_client import models as m

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
monotonic = time.monotonic

ItemLike: TypeAlias = m.MemoryItem | Mapping[str, Any] | str
MessageLike: TypeAlias = m.Message | Mapping[str, Any]
Filters: TypeAlias = Mapping[str, Any]
TimeRangeLike: TypeAlias = m.TimeRange | tuple[datetime | None, datetime | None] | None


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None

    def parse(self, response: httpx.Response) -> T:
        return self.read(response.json() if response.content else None)


def _call(
    method: str, path: str, model: type[M], body: BaseModel | None = None, **kw: Any
) -> Call[M]:
    return Call(method, path, model.model_validate, _body(body) if body else None, **kw)


def _body(model: BaseModel) -> dict[str, Any]:
    """The request as JSON; top-level fields left at None are not sent (the API's defaults)."""
    return {k: v for k, v in model.model_dump(mode="json").items() if v is not None}


def seg(value: str | UUID) -> str:
    """One path segment, escaped (document ids may hold slashes, spaces...)."""
    return quote(str(value), safe="")


def agent_path(agent_id: str, rest: str = "") -> str:
    return f"/api/agents/{seg(agent_id)}{rest}"


def _priority(backfill: bool) -> dict[str, str] | None:
    return {"X-Memora-Priority": "backfill"} if backfill else None


def _item(item: ItemLike) -> m.MemoryItem:
    if isinstance(item, str):
        return m.MemoryItem(content=item)
    if isinstance(item, m.MemoryItem):
        return item
    return m.MemoryItem.model_validate(dict(item))


def _message(message: MessageLike) -> m.Message:
    if isinstance(message, m.Message):
        return message
    if isinstance(message, m.MemoryItem):
        return m.Message.model_validate(message.model_dump())
    return m.Message.model_validate(dict(message))


def _time_range(value: TimeRangeLike) -> m.TimeRange | None:
    if value is None or isinstance(value, m.TimeRange):
        return value
    return m.TimeRange(start=value[0], end=value[1])


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


# ------------------------------------------------------------------------------- memories
def store_batch(
    agent_id: str,
    items: Sequence[ItemLike],
    document_id: str | None,
    title: str | None,
    update_mode: Literal["replace", "append"],
    backfill: bool,
    temporary: bool = False,
    channel: str | None = None,
) -> Call[m.BatchAccepted]:
    body = m.BatchRequest(
        agent_id=agent_id,
        items=[_item(i) for i in items],
        document_id=document_id,
        title=title,
        update_mode=update_mode,
        temporary=temporary,
        channel=channel,
    )
    return _call("POST", "/api/memories/batch", m.BatchAccepted, body, headers=_priority(backfill))


def append_messages(
    agent_id: str,
    conversation_id: str,
    messages: Sequence[MessageLike],
    title: str | None,
    backfill: bool,
    temporary: bool = False,
    end_of_conversation: bool = False,
    channel: str | None = None,
) -> Call[m.AppendAccepted]:
    body = m.AppendRequest(
        messages=[_message(x) for x in messages],
        title=title,
        temporary=temporary,
        end_of_conversation=end_of_conversation,
        channel=channel,
    )
    path = agent_path(agent_id, f"/conversations/{seg(conversation_id)}/messages")
    return _call("POST", path, m.AppendAccepted, body, headers=_priority(backfill))


def operation(operation_id: str | UUID) -> Call[m.Operation]:
    return _call("GET", f"/api/operations/{seg(operation_id)}", m.Operation)


def operations(
    agent_id: str | None, status: str | None, limit: int, cursor: str | None
) -> Call[m.OperationList]:
    params = _params(agent_id=agent_id, status=status, limit=limit, cursor=cursor)
    return _call("GET", "/api/operations", m.OperationList, params=params)


def memory(agent_id: str, memory_id: str | UUID) -> Call[m.Memory]:
    return _call("GET", agent_path(agent_id, f"/memories/{seg(memory_id)}"), m.Memory)


def entity(agent_id: str, name: str) -> Call[m.Entity]:
    return _call("GET", agent_path(agent_id, f"/entities/{seg(name)}"), m.Entity)


def list_documents(
    agent_id: str, limit: int, offset: int, trashed: bool = False
) -> Call[m.DocumentList]:
    params = _params(limit=limit, offset=offset, trashed="true" if trashed else None)
    return _call("GET", agent_path(agent_id, "/documents"), m.DocumentList, params=params)


def document_path(agent_id: str, document_id: str, rest: str = "") -> str:
    return agent_path(agent_id, f"/documents/{seg(document_id)}{rest}")


def get_document(agent_id: str, document_id: str) -> Call[m.DocumentDetail]:
    return _call("GET", document_path(agent_id, document_id), m.DocumentDetail)


def delete_document(agent_id: str, document_id: str, soft: bool = False) -> Call[m.DocumentDeleted]:
    params = {"soft": "true"} if soft else None
    return _call("DELETE", document_path(agent_id, document_id), m.DocumentDeleted, params=params)


def restore_document(agent_id: str, document_id: str) -> Call[m.DocumentRestored]:
    return _call("POST", document_path(agent_id, document_id, "/restore"), m.DocumentRestored)


# --------------------------------------------------------------------------------- reads
def search(
    agent_id: str,
    query: str,
    top_k: int,
    fact_type: Sequence[m.SearchableType] | None,
    thinking_budget: int,
    reranker: m.Reranker,
    max_tokens: int | None,
    reference_time: datetime | None,
    filters: Filters | None,
    trace: bool,
    as_of: datetime | None = None,
    after_operation: str | UUID | None = None,
    channel: str | Sequence[str] | None = None,
    follow_up: bool = False,
) -> Call[m.SearchResponse]:
    body = m.SearchRequest(
        agent_id=agent_id,
        query=query,
        top_k=top_k,
        fact_type=list(fact_type) if fact_type else None,
        thinking_budget=thinking_budget,
        reranker=reranker,
        max_tokens=max_tokens,
        reference_time=reference_time,
        filters=dict(filters) if filters is not None else None,
        trace=trace,
        as_of=as_of,
        after_operation=UUID(str(after_operation)) if after_operation else None,
        channel=_channels(channel),
        follow_up=follow_up or None,
    )
    return _call("POST", "/api/search", m.SearchResponse, body)


def think(
    agent_id: str,
    query: str,
    thinking_budget: int,
    top_k: int,
    reranker: m.Reranker,
    context: str | None,
    filters: Filters | None,
    as_of: datetime | None = None,
    include_reflections: bool | None = None,
    follow_up: bool = False,
) -> Call[m.ThinkResponse]:
    body = m.ThinkRequest(
        agent_id=agent_id,
        query=query,
        thinking_budget=thinking_budget,
        top_k=top_k,
        reranker=reranker,
        context=context,
        filters=dict(filters) if filters is not None else None,
        as_of=as_of,
        include_reflections=include_reflections,
        follow_up=follow_up or None,
    )
    return _call("POST", "/api/think", m.ThinkResponse, body)


def conversation_search(
    agent_id: str,
    query: str,
    limit: int,
    conversation_id: str | None,
    time_range: TimeRangeLike,
    roles: Sequence[m.Role] | None,
    min_score: float | None,
    highlight: bool | None = None,
    after_operation: str | UUID | None = None,
    channel: str | Sequence[str] | None = None,
) -> Call[m.ConversationSearchResponse]:
    body = m.ConversationSearchRequest(
        agent_id=agent_id,
        query=query,
        limit=limit,
        document_id=conversation_id,
        time_range=_time_range(time_range),
        roles=list(roles) if roles else None,
        min_score=min_score,
        highlight=highlight,
        after_operation=UUID(str(after_operation)) if after_operation else None,
        channel=_channels(channel),
    )
    return _call("POST", "/api/conversation_search", m.ConversationSearchResponse, body)


def _channels(channel: str | Sequence[str] | None) -> str | list[str] | None:
    return channel if channel is None or isinstance(channel, str) else list(channel)


# ----------------------------------------------------------------------------- lifecycle
def remember(
    agent_id: str,
    content: str,
    category: str | None,
    importance: float | None,
    related_to: Sequence[str | UUID],
) -> Call[m.RememberResponse]:
    body = m.RememberRequest(
        content=content,
        category=category,
        importance=importance,
        related_to=[UUID(str(r)) for r in related_to],
    )
    return _call("POST", agent_path(agent_id, "/remember"), m.RememberResponse, body)


def forget(
    agent_id: str,
    memory_id: str | UUID | None,
    query: str | None,
    reason: str | None,
    dry_run: bool,
    confirm: bool,
) -> Call[m.ForgetResponse]:
    body = m.ForgetRequest(
        memory_id=UUID(str(memory_id)) if memory_id is not None else None,
        query=query,
        reason=reason,
        dry_run=dry_run,
        confirm=confirm,
    )
    return _call("POST", agent_path(agent_id, "/forget"), m.ForgetResponse, body)


def edit(agent_id: str, memory_id: str | UUID, content: str) -> Call[m.EditResponse]:
    body = m.EditRequest(content=content)
    return _call("PATCH", agent_path(agent_id, f"/memories/{seg(memory_id)}"), m.EditResponse, body)


def restore(agent_id: str, memory_id: str | UUID) -> Call[dict[str, Any]]:
    return Call("POST", agent_path(agent_id, f"/memories/{seg(memory_id)}/restore"), dict)


def recall(
    agent_id: str,
    query: str,
    limit: int,
    time_range: TimeRangeLike,
    categories: Sequence[str] | None,
    include_reflections: bool,
    as_of: datetime | None = None,
    after_operation: str | UUID | None = None,
) -> Call[m.RecallResponse]:
    body = m.RecallRequest(
        query=query,
        limit=limit,
        time_range=_time_range(time_range),
        categories=list(categories) if categories else None,
        include_reflections=include_reflections,
        as_of=as_of,
        after_operation=UUID(str(after_operation)) if after_operation else None,
    )
    return _call("POST", agent_path(agent_id, "/recall"), m.RecallResponse, body)


def reflect(
    agent_id: str, topic: str | None, depth: Literal["shallow", "deep"]
) -> Call[m.ReflectResponse]:
    body = m.ReflectRequest(topic=topic, depth=depth)
    return _call("POST", agent_path(agent_id, "/reflect"), m.ReflectResponse, body)


def link(
    agent_id: str,
    memory_id: str | UUID,
    related_memory_id: str | UUID,
    relationship: str,
    weight: float,
) -> Call[m.LinkResponse]:
    body = m.LinkRequest(
        memory_id=UUID(str(memory_id)),
        related_memory_id=UUID(str(related_memory_id)),
        relationship=relationship,
        weight=weight,
    )
    return _call("POST", agent_path(agent_id, "/link"), m.LinkResponse, body)


# ------------------------------------------------------------------------------ profiles
def list_agents(limit: int, offset: int) -> Call[m.AgentList]:
    params = {"limit": limit, "offset": offset}
    return _call("GET", "/api/agents", m.AgentList, params=params)


def get_profile(agent_id: str) -> Call[m.AgentProfile]:
    return _call("GET", agent_path(agent_id, "/profile"), m.AgentProfile)


def update_profile(
    agent_id: str,
    personality: m.Personality | Mapping[str, float] | None,
    background: str | None,
    limits: Mapping[str, int | float | None] | None = None,
) -> Call[m.AgentProfile]:
    traits = (
        personality
        if personality is None or isinstance(personality, m.Personality)
        else m.Personality.model_validate(dict(personality))
    )
    body = m.AgentUpdate(personality=traits, background=background)
    payload = body.model_dump(mode="json", exclude_none=True)
    if limits is not None:  # its nulls are meant: no limit
        payload["limits"] = dict(limits)
    return Call("PUT", agent_path(agent_id), m.AgentProfile.model_validate, payload)


def opinions(agent_id: str, limit: int, offset: int) -> Call[m.OpinionList]:
    params = {"limit": limit, "offset": offset}
    return _call("GET", agent_path(agent_id, "/opinions"), m.OpinionList, params=params)


def opinion_history(agent_id: str, opinion_id: str | UUID) -> Call[m.OpinionHistory]:
    path = agent_path(agent_id, f"/opinions/{seg(opinion_id)}/history")
    return _call("GET", path, m.OpinionHistory)


def evolve(agent_id: str) -> Call[m.AgentEvolution]:
    return _call("POST", agent_path(agent_id, "/evolve"), m.AgentEvolution)


def delete_agent(agent_id: str) -> Call[m.AgentDeleted]:
    return _call("DELETE", agent_path(agent_id), m.AgentDeleted)


# ------------------------------------------------------------------------------ webhooks
def create_webhook(
    url: str, events: Sequence[m.WebhookEvent], description: str
) -> Call[m.WebhookCreated]:
    body = m.WebhookCreate(url=url, events=list(events), description=description)
    return _call("POST", "/api/webhooks", m.WebhookCreated, body)


def list_webhooks() -> Call[m.WebhookList]:
    return _call("GET", "/api/webhooks", m.WebhookList)


def delete_webhook(webhook_id: str | UUID) -> Call[None]:
    return Call("DELETE", f"/api/webhooks/{seg(webhook_id)}", lambda _: None)


def test_webhook(webhook_id: str | UUID) -> Call[m.WebhookPing]:
    return _call("POST", f"/api/webhooks/{seg(webhook_id)}/test", m.WebhookPing)


def webhook_deliveries(webhook_id: str | UUID, limit: int) -> Call[m.WebhookDeliveryList]:
    path = f"/api/webhooks/{seg(webhook_id)}/deliveries"
    return _call("GET", path, m.WebhookDeliveryList, params={"limit": limit})


def raw(method: str, path: str, json: Any, params: Mapping[str, Any] | None) -> Call[Any]:
    return Call(method.upper(), path, lambda body: body, json, params)


def headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    out = {"Accept": "application/json", "User-Agent": "memora-client/0.1"}
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    out.update(extra or {})
    return out
