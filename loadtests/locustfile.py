"""Locust scenarios for Memora (docs/loadtests.md). Run them through `loadtests/run.py`, which
starts the stack, seeds data, runs locust headless and then checks that nothing was lost.

User classes (the runner picks them by scenario):
- `ChatIngestUser`: a chat platform streaming a conversation: many small batches of 1–4 turns
  (`"Name: text"`), each batch its own document, retried with the same `document_id` on failure
  (the API answers `unchanged` to an identical repost, so retries never duplicate).
- `SearchUser`: `POST /api/search` over the seeded agents (and, in the mixed scenario, the
  agents being ingested).

In the chaos scenario (`MEMORA_LT_PATIENCE_SECONDS` > 0) a 503 JSON error with `Retry-After`
is a clear answer, not a failure: it is counted per endpoint as `unavailable`, the user waits
the time it names, and a batch is posted again (same `document_id`) until it is acknowledged
or the patience runs out. Anything else that is not a 200 (a 500, a reset, a 503 without
Retry-After) is a failure.

Every accepted batch (a 200 answer) is written to a ledger (JSON, `MEMORA_LT_LEDGER`) when locust
exits; the runner compares it with the database. Settings come from `MEMORA_LT_*` variables.
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


class Ledger:
    """What the API acknowledged, per agent; written once when locust exits."""

    def __init__(self) -> None:
        self.batches: dict[str, int] = defaultdict(int)
        self.items: dict[str, int] = defaultdict(int)
        self.operations: list[str] = []
        self.unacknowledged: list[dict[str, str]] = []
        self.requests = 0
        self.latencies_ms: dict[str, list[float]] = defaultdict(list)
        self.failures: dict[str, int] = defaultdict(int)
        self.unavailable: dict[str, int] = defaultdict(int)
        self.started_at = 0.0
        self.stopped_at = 0.0

    def accept(self, agent_id: str, items: int, operation_id: str) -> None:
        """The first 200 for a batch: `created`, or `unchanged` when an earlier attempt was
        stored although its answer never arrived. Either way the batch is durable, once."""
        self.batches[agent_id] += 1
        self.items[agent_id] += items
        self.operations.append(operation_id)

    def dump(self, path: str) -> None:
        data = {
            "run_id": RUN_ID,
            "started_at": self.started_at,
            "stopped_at": self.stopped_at,
            "requests": self.requests,
            "batches": dict(self.batches),
            "items": dict(self.items),
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
    """One conversation at a time: small batches of turns, as a chat platform streams them."""

    wait_time = between(0.05, 0.5)

    def on_start(self) -> None:
        self.agent_id = f"lt-{RUN_ID}-c{random.randrange(CHAT_AGENTS)}"
        self.conversation = uuid.uuid4().hex[:12]
        self.speakers = random.sample(["Alice", "Bob", "Carol", "Dan", "Erin", "Frank"], 2)
        self.clock = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=random.randrange(300))
        self.seq = 0

    @task
    def post_turns(self) -> None:
        if not _budget_left(self):
            return
        items = []
        for _ in range(random.randint(1, MAX_TURNS)):
            self.clock += timedelta(seconds=random.randint(5, 120))
            speaker = self.speakers[self.seq % 2]
            self.seq += 1
            items.append({"content": f"{speaker}: {turn()}", "event_date": self.clock.isoformat()})
        body = {
            "agent_id": self.agent_id,
            "document_id": f"{self.conversation}-{self.seq:06d}",
            "items": items,
        }
        give_up = time.monotonic() + PATIENCE_SECONDS
        attempt = 0
        while attempt < RETRIES or time.monotonic() < give_up:
            attempt += 1
            wait = 0.5
            with self.client.post(
                "/api/memories/batch", json=body, catch_response=True
            ) as response:
                if response.status_code == 200:
                    data = response.json()
                    LEDGER.accept(self.agent_id, len(items), data["operation_id"])
                    return
                retry_after = _clearly_unavailable(response, "/api/memories/batch")
                if retry_after is None:
                    response.failure(f"{response.status_code}: {(response.text or '')[:200]}")
                else:
                    wait = retry_after
            gevent.sleep(wait)
        LEDGER.unacknowledged.append(
            {"agent_id": self.agent_id, "document_id": str(body["document_id"])}
        )


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
