"""Locust scenarios for Memora (docs/loadtests.md). Run them through `loadtests/run.py`, which
starts the stack, seeds data, runs locust headless and then checks that nothing was lost.

User classes (the runner picks them by scenario):
- `ChatIngestUser`: a chat platform streaming live conversations. Each user streams into its
  own conversation, appending 1–4 messages at a time (`POST /api/agents/{a}/conversations/{c}/
  messages`, each message with its id, role, speaker and time), and starts a new conversation
  after `MEMORA_LT_CONVERSATION_MESSAGES` messages. A failed append is sent again unchanged:
  message ids make the retry safe (a message already stored is `messages_existing`, never a
  second copy). `MEMORA_LT_CHAT_MODE=documents` is the earlier behaviour: each batch of turns
  its own document (`POST /api/memories/batch`, retried with the same `document_id`).
- `SearchUser`: `POST /api/search` over the seeded agents (and, in the mixed scenario, the
  agents being ingested).

In the chaos scenario (`MEMORA_LT_PATIENCE_SECONDS` > 0) a 503 JSON error with `Retry-After`
is a clear answer, not a failure: it is counted per endpoint as `unavailable`, the user waits
the time it names, and the same request is sent again until it is acknowledged or the
patience runs out. Anything else that is not a 200/202 (a 500, a reset, a 503 without
Retry-After, a 409) is a failure.

Every accepted request is written to a ledger (JSON, `MEMORA_LT_LEDGER`) when locust exits,
with, per conversation, the ids of the acknowledged messages in the order they were sent; the
runner compares it with the database and the documents. Settings come from `MEMORA_LT_*`
variables.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import gevent
from locust import FastHttpUser, between, events, task
from locust.env import Environment

from loadtests.corpus import queries, turn

RUN_ID = os.environ.get("MEMORA_LT_RUN_ID") or uuid.uuid4().hex[:8]
LEDGER_PATH = os.environ.get("MEMORA_LT_LEDGER", "")
MAX_REQUESTS = int(os.environ.get("MEMORA_LT_MAX_REQUESTS", "0"))  # 0: only the run time bounds
CHAT_AGENTS = int(os.environ.get("MEMORA_LT_CHAT_AGENTS", "8"))
SEARCH_AGENTS = [a for a in os.environ.get("MEMORA_LT_SEARCH_AGENTS", "").split(",") if a]
QUERY_HOST = os.environ.get("MEMORA_LT_QUERY_HOST", "").rstrip("/")  # "" = the --host
MAX_TURNS = int(os.environ.get("MEMORA_LT_MAX_TURNS", "4"))
RETRIES = 3
PATIENCE_SECONDS = float(os.environ.get("MEMORA_LT_PATIENCE_SECONDS", "0"))  # 0: RETRIES
CHAT_MODE = os.environ.get("MEMORA_LT_CHAT_MODE", "append")  # or "documents"
CONVERSATION_MESSAGES = int(os.environ.get("MEMORA_LT_CONVERSATION_MESSAGES", "100"))
BATCH_NAME = "/api/memories/batch"
APPEND_NAME = "/api/agents/[agent]/conversations/[conversation]/messages"


class Ledger:
    """What the API acknowledged, per agent; written once when locust exits."""

    def __init__(self) -> None:
        self.batches: dict[str, int] = defaultdict(int)
        self.items: dict[str, int] = defaultdict(int)
        self.documents: dict[str, set[str]] = defaultdict(set)
        # [agent, conversation, acknowledged message ids in the order they were sent]
        self.conversations: dict[tuple[str, str], list[str]] = {}
        self.operations: list[str] = []
        self.unacknowledged: list[dict[str, Any]] = []
        self.requests = 0
        self.latencies_ms: dict[str, list[float]] = defaultdict(list)
        self.failures: dict[str, int] = defaultdict(int)
        self.unavailable: dict[str, int] = defaultdict(int)
        self.started_at = 0.0
        self.stopped_at = 0.0

    def accept(
        self,
        agent_id: str,
        document_id: str,
        items: int,
        operation_id: str | None,
        message_ids: list[str] | None = None,
    ) -> None:
        """The first 200/202 for a request: `created`/`appended`, or `unchanged` when an earlier
        attempt was stored although its answer never arrived. Either way it is durable, once."""
        self.batches[agent_id] += 1
        self.items[agent_id] += items
        self.documents[agent_id].add(document_id)
        if operation_id:  # none when every message was already there
            self.operations.append(operation_id)
        if message_ids is not None:
            self.conversations.setdefault((agent_id, document_id), []).extend(message_ids)

    def dump(self, path: str) -> None:
        data = {
            "run_id": RUN_ID,
            "started_at": self.started_at,
            "stopped_at": self.stopped_at,
            "requests": self.requests,
            "batches": dict(self.batches),
            "items": dict(self.items),
            "documents": {agent: len(ids) for agent, ids in self.documents.items()},
            "conversations": [[a, c, ids] for (a, c), ids in self.conversations.items()],
            "operations": self.operations,
            "unacknowledged": self.unacknowledged,
            "latencies_ms": dict(self.latencies_ms),
            "failures": dict(self.failures),
            "unavailable": dict(self.unavailable),
        }
        with open(path, "w") as fh:
            json.dump(data, fh)


LEDGER = Ledger()
_quitting = False


@events.test_start.add_listener
def _on_start(environment: Environment, **_: Any) -> None:
    LEDGER.started_at = time.time()


@events.test_stop.add_listener
def _on_stop(environment: Environment, **_: Any) -> None:
    LEDGER.stopped_at = time.time()


@events.quitting.add_listener
def _on_quit(environment: Environment, **_: Any) -> None:
    if LEDGER_PATH:
        LEDGER.dump(LEDGER_PATH)


@events.request.add_listener
def _count(name: str, response_time: float, exception: Exception | None, **_: Any) -> None:
    LEDGER.requests += 1
    LEDGER.latencies_ms[name].append(response_time)
    if exception is not None:
        LEDGER.failures[name] += 1


def _budget_left(user: FastHttpUser) -> bool:
    """False after MAX_REQUESTS requests; the first user to see that stops the whole run
    (gracefully: tasks in flight finish, and their answers are recorded)."""
    global _quitting
    if not MAX_REQUESTS or LEDGER.requests < MAX_REQUESTS:
        return True
    if not _quitting and user.environment.runner is not None:
        _quitting = True
        gevent.spawn(user.environment.runner.quit)
    return False


def _clearly_unavailable(response: Any, name: str) -> float | None:
    """In the chaos scenario, a 503 JSON error with Retry-After: counted as `unavailable` (not a
    failure); returns the seconds to wait. None for anything else."""
    if not PATIENCE_SECONDS or response.status_code != 503:
        return None
    retry_after = response.headers.get("Retry-After") or response.headers.get("retry-after")
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    if not retry_after or not retry_after.isdigit() or not code:
        return None
    response.success()
    LEDGER.unavailable[name] += 1
    return min(float(retry_after), 10.0)


class ChatIngestUser(FastHttpUser):
    """A chat platform's conversations, one at a time: live appends of 1–MAX_TURNS messages
    (or, in the `documents` mode, small batches of turns, each its own document)."""

    wait_time = between(0.05, 0.5)

    def on_start(self) -> None:
        self.agent_id = f"lt-{RUN_ID}-c{random.randrange(CHAT_AGENTS)}"
        self.speakers = random.sample(["Alice", "Bob", "Carol", "Dan", "Erin", "Frank"], 2)
        self.clock = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=random.randrange(300))
        self.seq = 0
        self.conversation = uuid.uuid4().hex[:12]

    @task
    def post_turns(self) -> None:
        if not _budget_left(self):
            return
        if CHAT_MODE == "documents":
            self.post_document()
        else:
            self.append()

    def messages(self) -> list[dict[str, Any]]:
        out = []
        for _ in range(random.randint(1, MAX_TURNS)):
            self.clock += timedelta(seconds=random.randint(5, 120))
            out.append(
                {
                    "message_id": f"m{self.seq:06d}",
                    "role": ("user", "assistant")[self.seq % 2],
                    "speaker": self.speakers[self.seq % 2],
                    "content": turn(),
                    "event_date": self.clock.isoformat(),
                }
            )
            self.seq += 1
        return out

    def append(self) -> None:
        if self.seq >= CONVERSATION_MESSAGES:  # the conversation is over: start another
            self.conversation, self.seq = uuid.uuid4().hex[:12], 0
        messages = self.messages()
        path = f"/api/agents/{self.agent_id}/conversations/{self.conversation}/messages"
        data = self.send(path, {"messages": messages}, APPEND_NAME)
        ids = [m["message_id"] for m in messages]
        if data is None:
            LEDGER.unacknowledged.append(
                {"agent_id": self.agent_id, "conversation_id": self.conversation, "ids": ids}
            )
            return
        LEDGER.accept(self.agent_id, self.conversation, len(ids), data["operation_id"], ids)

    def post_document(self) -> None:
        items = [
            {"content": f"{m['speaker']}: {m['content']}", "event_date": m["event_date"]}
            for m in self.messages()
        ]
        document_id = f"{self.conversation}-{self.seq:06d}"
        body = {"agent_id": self.agent_id, "document_id": document_id, "items": items}
        data = self.send("/api/memories/batch", body, BATCH_NAME)
        if data is None:
            LEDGER.unacknowledged.append({"agent_id": self.agent_id, "document_id": document_id})
            return
        LEDGER.accept(self.agent_id, document_id, len(items), data["operation_id"])

    def send(self, path: str, body: dict[str, Any], name: str) -> dict[str, Any] | None:
        """POSTs the same body until it is acknowledged (200/202): RETRIES attempts, or, in the
        chaos scenario, until the patience runs out. None when it never was."""
        give_up = time.monotonic() + PATIENCE_SECONDS
        attempt = 0
        while attempt < RETRIES or time.monotonic() < give_up:
            attempt += 1
            wait = 0.5
            with self.client.post(path, json=body, name=name, catch_response=True) as response:
                if response.status_code in (200, 202):
                    data: dict[str, Any] = response.json()
                    return data
                retry_after = _clearly_unavailable(response, name)
                if retry_after is None:
                    response.failure(f"{response.status_code}: {(response.text or '')[:200]}")
                else:
                    wait = retry_after
            gevent.sleep(wait)
        return None


class SearchUser(FastHttpUser):
    """Searches the seeded agents (and the ones being ingested, in the mixed scenario)."""

    wait_time = between(0.05, 0.5)

    def on_start(self) -> None:
        chat = (
            [f"lt-{RUN_ID}-c{n}" for n in range(CHAT_AGENTS)]
            if ChatIngestUser in (getattr(self.environment, "user_classes", None) or [])
            else []
        )
        self.agents = SEARCH_AGENTS + chat or [f"lt-{RUN_ID}-c0"]

    @task
    def search(self) -> None:
        if not _budget_left(self):
            return
        body = {
            "agent_id": random.choice(self.agents),
            "query": random.choice(queries()),
            "top_k": 10,
        }
        url = f"{QUERY_HOST}/api/search" if QUERY_HOST else "/api/search"
        retry_after = None
        with self.client.post(url, json=body, name="/api/search", catch_response=True) as response:
            if response.status_code != 200:
                retry_after = _clearly_unavailable(response, "/api/search")
                if retry_after is None:
                    response.failure(f"{response.status_code}: {(response.text or '')[:200]}")
        if retry_after:
            gevent.sleep(retry_after)
