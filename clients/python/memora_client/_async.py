"""The asynchronous client: the API's methods (its connection: _async_base.py).

Generated from _sync.py and _sync_base.py by clients/python/scripts/generate_async.py:
do not edit."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from memora_client import _calls as c
from memora_client import _simulation_calls as sim
from memora_client import models as m
from memora_client._async_base import AsyncMemoraClientBase
from memora_client.errors import (
    OperationFailedError,
    OperationTimeoutError,
)


class AsyncMemoraClient(AsyncMemoraClientBase):
    """A client of Memora's HTTP API (the write API's port, which serves every route).

    `base_url`: e.g. `http://localhost:8080`; `api_key`: sent as `Authorization: Bearer`;
    `timeout`: seconds per request (or an `httpx.Timeout`); `max_retries`, `backoff`,
    `max_backoff`: retries of 429 and 503 answers, after their `Retry-After` when they give
    one, else with exponential back-off. `headers` are added to every request; `transport`
    replaces httpx's (tests, proxies). `http_client`: an httpx client of your own (its base
    URL, headers, timeout and connections), used instead of a new one and not closed by
    `close()`; `base_url`, `api_key`, `timeout`, `headers` and `transport` are then ignored.

    Use it as an async context manager, or await `close()`::

        async with AsyncMemoraClient("http://localhost:8080") as memora:
            accepted = await memora.store_batch("maya", ["Maya is planning a trip to Kyoto."])
            await memora.wait_for(accepted.operation_id)
            found = await memora.search("maya", "Where is Maya going?")
            print([hit.text for hit in found.results])

    Errors are exceptions from `memora_client.errors`, carrying the API's error `code`.
    """

    # ---------------------------------------------------------------------------- writes
    async def store_batch(
        self,
        agent_id: str,
        items: Sequence[c.ItemLike],
        document_id: str | None = None,
        *,
        title: str | None = None,
        update_mode: Literal["replace", "append"] = "replace",
        backfill: bool = False,
        temporary: bool = False,
        channel: str | None = None,
    ) -> m.BatchAccepted:
        """Stores raw items (`POST /api/memories/batch`); extraction runs in the background as
        the answer's `operation_id` (see `wait_for`). Items are `MemoryItem`s, dicts of their
        fields, or plain strings (the content). Idempotent per `document_id`: the same content
        again is `unchanged`, other content `replaced`; `update_mode="append"` adds the items
        to the document as new messages. `backfill=True` processes on the backfill queues.
        `temporary=True`: a temporary chat, nothing remembered (docs/conversations.md).
        `channel`: where the items were said (`web`, `teams`...), for those that name none."""
        return await self._request(
            c.store_batch(
                agent_id, items, document_id, title, update_mode, backfill, temporary, channel
            )
        )

    async def append_messages(
        self,
        agent_id: str,
        conversation_id: str,
        messages: Sequence[c.MessageLike],
        *,
        title: str | None = None,
        backfill: bool = False,
        temporary: bool = False,
        end_of_conversation: bool = False,
        channel: str | None = None,
    ) -> m.AppendAccepted:
        """Appends messages to a live conversation (created on first use). Each message needs
        `message_id` and `role`; an id already stored is skipped (safe retries), the same id
        with other content is a `ConflictError` (`message_conflict`). `temporary=True`: nothing
        remembered from these messages. `end_of_conversation=True`: once they are processed,
        the agent's memory evolution runs (`evolve`). `channel`: where they were said, for
        the messages that name none."""
        call = c.append_messages(
            agent_id, conversation_id, messages, title, backfill, temporary, end_of_conversation,
            channel,
        )  # fmt: skip
        return await self._request(call)

    async def operation(self, operation_id: str | UUID) -> m.Operation:
        """An operation's status and stages; `NotFoundError` for an id of another tenant."""
        return await self._request(c.operation(operation_id))

    async def operations(
        self,
        agent_id: str | None = None,
        *,
        status: m.OperationStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> m.OperationList:
        """The tenant's operations, newest first; pass `next_cursor` as `cursor` to page on."""
        return await self._request(c.operations(agent_id, status, limit, cursor))

    async def wait_for(
        self,
        operation_id: str | UUID,
        timeout: float = 120.0,
        *,
        interval: float = 0.5,
        raise_on_failure: bool = True,
    ) -> m.Operation:
        """Polls the operation until it is completed, failed or superseded, and returns it.

        Raises `OperationTimeoutError` after `timeout` seconds, and `OperationFailedError` when
        it ended `failed` (unless `raise_on_failure=False`)."""
        deadline = c.monotonic() + timeout
        while True:
            op = await self.operation(operation_id)
            if op.finished:
                if op.status == "failed" and raise_on_failure:
                    raise OperationFailedError(op)
                return op
            left = deadline - c.monotonic()
            if left <= 0:
                raise OperationTimeoutError(op, timeout)
            await asyncio.sleep(min(interval, left))

    async def memory(self, agent_id: str, memory_id: str | UUID) -> m.Memory:
        """One memory in full, in any status: entities, links and history included."""
        return await self._request(c.memory(agent_id, memory_id))

    async def entity(self, agent_id: str, name: str) -> m.Entity:
        """One entity (id, name or alias) with its relations, current first, with evidence."""
        return await self._request(c.entity(agent_id, name))

    # ------------------------------------------------------------------------- documents
    async def list_documents(
        self, agent_id: str, *, limit: int = 100, offset: int = 0, trashed: bool = False
    ) -> m.DocumentList:
        """The agent's documents (conversations included), with their counts and status;
        `trashed=True`: those in the trash instead."""
        return await self._request(c.list_documents(agent_id, limit, offset, trashed))

    async def get_document(self, agent_id: str, document_id: str) -> m.DocumentDetail:
        """One document with its raw items exactly as they were stored."""
        return await self._request(c.get_document(agent_id, document_id))

    async def delete_document(
        self, agent_id: str, document_id: str, *, soft: bool = False
    ) -> m.DocumentDeleted:
        """Hard delete of the document and everything extracted from it (idempotent); `soft`:
        into the trash instead, out of every search, restorable until `purge_after`."""
        return await self._request(c.delete_document(agent_id, document_id, soft))

    async def restore_document(self, agent_id: str, document_id: str) -> m.DocumentRestored:
        """Takes a document out of the trash, its memories and messages searchable again."""
        return await self._request(c.restore_document(agent_id, document_id))

    # ----------------------------------------------------------------------------- reads
    async def search(
        self,
        agent_id: str,
        query: str,
        top_k: int = 10,
        *,
        fact_type: Sequence[m.SearchableType] | None = None,
        thinking_budget: int = 100,
        reranker: m.Reranker = "heuristic",
        max_tokens: int | None = None,
        reference_time: datetime | None = None,
        filters: c.Filters | None = None,
        trace: bool = False,
        as_of: datetime | None = None,
        after_operation: str | UUID | None = None,
        channel: str | Sequence[str] | None = None,
        follow_up: bool = False,
    ) -> m.SearchResponse:
        """Fused retrieval over the agent's memories (`POST /api/search`): `results` with
        `id`, `text`, `weight`, `fact_type`, dates and metadata. `fact_type` limits it to some
        networks (or adds "reflection"); `filters` as the API's (metadata equality, `tags`,
        `time`); `as_of`: what was true then, superseded memories included;
        `after_operation`: an operation id a write answered with: the search sees what it made
        searchable (it waits for it, a bounded time); `channel`: only memories from messages
        said there (one or a list); `follow_up`: a second round an LLM plans from the
        first's results (multi-hop questions; the service needs an LLM), `follow_up.queries`
        and `.usage` in the answer."""
        call = c.search(
            agent_id, query, top_k, fact_type, thinking_budget, reranker, max_tokens,
            reference_time, filters, trace, as_of, after_operation, channel, follow_up,
        )  # fmt: skip
        return await self._request(call)

    async def think(
        self,
        agent_id: str,
        query: str,
        *,
        thinking_budget: int = 50,
        top_k: int = 10,
        reranker: m.Reranker = "heuristic",
        context: str | None = None,
        filters: c.Filters | None = None,
        as_of: datetime | None = None,
        include_reflections: bool | None = None,
        follow_up: bool = False,
    ) -> m.ThinkResponse:
        """An answer in the agent's voice from its memories (needs the server's LLM), what it
        was `based_on` per network, and the opinions it formed; `as_of`: from what was true
        then; `include_reflections=False`: without the agent's reflections; `follow_up`: a
        follow-up round of searches first, as `search`'s."""
        call = c.think(agent_id, query, thinking_budget, top_k, reranker, context, filters, as_of,
                       include_reflections, follow_up)  # fmt: skip
        return await self._request(call)

    async def conversation_search(
        self,
        agent_id: str,
        query: str,
        limit: int = 5,
        *,
        conversation_id: str | None = None,
        time_range: c.TimeRangeLike = None,
        roles: Sequence[m.Role] | None = None,
        min_score: float | None = None,
        highlight: bool | None = None,
        after_operation: str | UUID | None = None,
        channel: str | Sequence[str] | None = None,
    ) -> m.ConversationSearchResponse:
        """Hybrid search over the raw messages of the agent's conversations, one result per
        message (`limit` at most 20); `time_range` is a `TimeRange` or a `(start, end)` pair;
        `highlight`: each result's matched words (`highlights`, `snippet_highlighted`);
        `after_operation`: as `search`'s; `channel`: only messages said there (one or a
        list)."""
        return await self._request(
            c.conversation_search(
                agent_id,
                query,
                limit,
                conversation_id,
                time_range,
                roles,
                min_score,
                highlight,
                after_operation,
                channel,
            )
        )

    # ------------------------------------------------------------------------- lifecycle
    async def remember(
        self,
        agent_id: str,
        content: str,
        *,
        category: str | None = None,
        importance: float | None = None,
        related_to: Sequence[str | UUID] = (),
    ) -> m.RememberResponse:
        """Stores one memory now: `decision` is ADD, SKIP (same text), MERGE (a near-duplicate)
        or SUPERSEDE (a changed attribute)."""
        return await self._request(c.remember(agent_id, content, category, importance, related_to))

    async def forget(
        self,
        agent_id: str,
        memory_id: str | UUID | None = None,
        *,
        query: str | None = None,
        reason: str | None = None,
        dry_run: bool = False,
        confirm: bool = False,
    ) -> m.ForgetResponse:
        """Soft delete, by id or by query (`dry_run` lists what would go; more matches than
        the server's cap need `confirm`). Restorable for `restorable_for_days`."""
        return await self._request(c.forget(agent_id, memory_id, query, reason, dry_run, confirm))

    async def edit(self, agent_id: str, memory_id: str | UUID, content: str) -> m.EditResponse:
        """A corrected text for an active memory: a new version that supersedes it (the old one
        keeps its history and can be restored)."""
        return await self._request(c.edit(agent_id, memory_id, content))

    async def restore(self, agent_id: str, memory_id: str | UUID) -> dict[str, Any]:
        """A forgotten (within the retention), archived or superseded memory: active again."""
        return await self._request(c.restore(agent_id, memory_id))

    async def recall(
        self,
        agent_id: str,
        query: str,
        limit: int = 10,
        *,
        time_range: c.TimeRangeLike = None,
        categories: Sequence[str] | None = None,
        include_reflections: bool = True,
        as_of: datetime | None = None,
        after_operation: str | UUID | None = None,
    ) -> m.RecallResponse:
        """Memories reranked by relevance, recency, importance and frequency; `as_of`: those
        true then, superseded ones included; `after_operation`: as `search`'s."""
        return await self._request(
            c.recall(
                agent_id,
                query,
                limit,
                time_range,
                categories,
                include_reflections,
                as_of,
                after_operation,
            )
        )

    async def reflect(
        self,
        agent_id: str,
        topic: str | None = None,
        *,
        depth: Literal["shallow", "deep"] = "shallow",
    ) -> m.ReflectResponse:
        """Insights drawn from related memories, stored as reflections (needs the LLM)."""
        return await self._request(c.reflect(agent_id, topic, depth))

    async def link(
        self,
        agent_id: str,
        memory_id: str | UUID,
        related_memory_id: str | UUID,
        relationship: str = "related_to",
        *,
        weight: float = 1.0,
    ) -> m.LinkResponse:
        """A typed link between two memories, both ways, that graph retrieval follows."""
        return await self._request(
            c.link(agent_id, memory_id, related_memory_id, relationship, weight)
        )

    # -------------------------------------------------------------------------- profiles
    async def list_agents(self, *, limit: int = 1000, offset: int = 0) -> m.AgentList:
        """The tenant's agents with their profiles."""
        return await self._request(c.list_agents(limit, offset))

    async def get_profile(self, agent_id: str) -> m.AgentProfile:
        """The agent's personality and background (created with defaults if new)."""
        return await self._request(c.get_profile(agent_id))

    async def update_profile(
        self,
        agent_id: str,
        *,
        personality: m.Personality | Mapping[str, float] | None = None,
        background: str | None = None,
        limits: Mapping[str, int | float | None] | None = None,
    ) -> m.AgentProfile:
        """Creates or updates the agent: personality traits and `limits` (max_memories,
        max_reflections, max_graph_nodes, archive_retention_days; None: no limit) merge over the
        current ones, `background` replaces it."""
        return await self._request(c.update_profile(agent_id, personality, background, limits))

    async def opinions(self, agent_id: str, *, limit: int = 100, offset: int = 0) -> m.OpinionList:
        """The agent's current opinions (latest version of each), newest first."""
        return await self._request(c.opinions(agent_id, limit, offset))

    async def opinion_history(self, agent_id: str, opinion_id: str | UUID) -> m.OpinionHistory:
        """Every version of an opinion, oldest first."""
        return await self._request(c.opinion_history(agent_id, opinion_id))

    async def evolve(self, agent_id: str) -> m.AgentEvolution:
        """Runs the agent's memory evolution now (consolidation, and reflection when due) as an
        `evolve` operation, instead of at the periodic jobs' next run; `NotFoundError` for an
        agent without memories."""
        return await self._request(c.evolve(agent_id))

    async def delete_agent(self, agent_id: str) -> m.AgentDeleted:
        """Hard delete of the agent and all its data (idempotent)."""
        return await self._request(c.delete_agent(agent_id))

    # --------------------------------------------------------------------------- simulations
    async def seed(self, seed_file: Mapping[str, Any]) -> m.SeedResponse:
        """A scenario and its characters stored as memories (seed 001's seed file, as JSON);
        idempotent: the same file again changes nothing, a changed character replaces only its
        documents."""
        return await self._request(sim.seed(seed_file))

    async def capture_episode(
        self,
        scene: str,
        turn: int,
        speaker: str,
        text: str,
        listeners: Sequence[str],
        *,
        event_date: datetime | None = None,
    ) -> m.EpisodeResponse:
        """`"{speaker} said: {text}"` as an episodic memory of every listener; idempotent on
        (scene, turn, speaker)."""
        return await self._request(
            sim.capture_episode(scene, turn, speaker, text, listeners, event_date)
        )

    async def capture_episodes(
        self, scene: str, listeners: Sequence[str], lines: Sequence[sim.LineLike]
    ) -> m.EpisodeBatchResponse:
        """Several lines of one scene (`EpisodeLine`s or dicts of turn, speaker, text and
        optionally event_date), each stored as `capture_episode` stores it for every
        listener, in one request and one transaction: all of them or none."""
        return await self._request(sim.capture_episodes(scene, listeners, lines))

    # -------------------------------------------------------------------------- webhooks
    async def create_webhook(
        self,
        url: str,
        events: Sequence[m.WebhookEvent],
        *,
        description: str = "",
    ) -> m.WebhookCreated:
        """Registers an endpoint for these events; the answer's `secret` (shown only now)
        verifies the deliveries' Standard Webhooks signatures (docs/webhooks.md)."""
        return await self._request(c.create_webhook(url, events, description))

    async def list_webhooks(self) -> m.WebhookList:
        """The tenant's endpoints with their deliveries per status."""
        return await self._request(c.list_webhooks())

    async def delete_webhook(self, webhook_id: str | UUID) -> None:
        """Removes an endpoint and its deliveries."""
        return await self._request(c.delete_webhook(webhook_id))

    async def test_webhook(self, webhook_id: str | UUID) -> m.WebhookPing:
        """Sends a `webhook.ping` event to the endpoint now."""
        return await self._request(c.test_webhook(webhook_id))

    async def list_webhook_deliveries(
        self, webhook_id: str | UUID, *, limit: int = 50
    ) -> m.WebhookDeliveryList:
        """The endpoint's deliveries, newest first: status, attempts, the last answer."""
        return await self._request(c.webhook_deliveries(webhook_id, limit))
