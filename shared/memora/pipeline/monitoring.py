"""What operators look at: broker queue depths, operations per state and beat's heartbeat.

Read by the API's /metrics (cached) and by `memora status`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection

from memora.basics.stages import OperationStatus, all_queues
from memora.store import operation_counts

# Kombu's Redis transport with `queue_order_strategy: priority` keeps one list per priority
# step: the queue's own name (priority 0, which is what Memora sends) and `<queue>\x06\x16<n>`.
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)
# The Unix time of beat's last heartbeat task (services/workers/heartbeat.py), in the broker.
BEAT_HEARTBEAT_KEY = "memora:beat:heartbeat"
# A message header: the Unix time its sender sent it (services/workers/dispatch.py).
SENT_AT_HEADER = "memora_sent_at"


def redis_lists(queue: str) -> list[str]:
    return [queue, *(f"{queue}{PRIORITY_SEPARATOR}{step}" for step in PRIORITY_STEPS)]


def queue_depths(client: Any, queues: Iterable[str] | None = None) -> dict[str, int]:
    """Messages waiting per queue (not those a worker holds unacknowledged). `client`: a
    redis.Redis; one round trip for all queues."""
    names = list(queues or all_queues())
    pipe = client.pipeline(transaction=False)
    for queue in names:
        for key in redis_lists(queue):
            pipe.llen(key)
    lengths = pipe.execute()
    steps = len(PRIORITY_STEPS) + 1
    return {q: int(sum(lengths[i * steps : (i + 1) * steps])) for i, q in enumerate(names)}


def queue_oldest_ages(
    client: Any, queues: Iterable[str] | None = None, now: float | None = None
) -> dict[str, float]:
    """Seconds the oldest message of each queue has waited (0: none waits), from the time its
    sender stamped on it (`SENT_AT_HEADER`); the next one a worker takes is the tail of each
    priority list. One round trip for all queues."""
    names = list(queues or all_queues())
    pipe = client.pipeline(transaction=False)
    for queue in names:
        for key in redis_lists(queue):
            pipe.lindex(key, -1)
    tails = pipe.execute()
    steps = len(PRIORITY_STEPS) + 1
    now = time.time() if now is None else now
    ages = {}
    for i, queue in enumerate(names):
        sent = [t for raw in tails[i * steps : (i + 1) * steps] if (t := _sent_at(raw))]
        ages[queue] = max(0.0, now - min(sent)) if sent else 0.0
    return ages


def _sent_at(raw: bytes | None) -> float | None:
    """A Celery message's send time, when its sender stamped one."""
    if raw is None:
        return None
    try:
        stamp = json.loads(raw)["headers"][SENT_AT_HEADER]
    except (ValueError, KeyError, TypeError):  # not a stamped Celery message
        return None
    return float(stamp)


def record_beat_heartbeat(client: Any, now: float | None = None) -> float:
    """Stamps the time of a heartbeat; `client`: the broker's redis.Redis."""
    stamp = time.time() if now is None else now
    client.set(BEAT_HEARTBEAT_KEY, repr(stamp))
    return stamp


def beat_heartbeat(client: Any) -> float | None:
    """The Unix time of the last heartbeat, None before the first."""
    value = client.get(BEAT_HEARTBEAT_KEY)
    return float(value) if value is not None else None


@dataclass(frozen=True)
class OperationStats:
    by_status: dict[OperationStatus, int] = field(default_factory=dict)
    active_by_stage: dict[str, int] = field(default_factory=dict)
    oldest_active_seconds: float = 0.0


def operation_stats(conn: Connection[Any]) -> OperationStats:
    """Counts per status (a scan of the table: cache it), and the active (queued or running)
    operations per stage with the age of the oldest (the partial index on active rows)."""
    active_rows = operation_counts.active_by_stage(conn)
    return OperationStats(
        by_status=operation_counts.count_by_status(conn),
        active_by_stage={r["stage"]: int(r["n"]) for r in active_rows},
        oldest_active_seconds=max((float(r["oldest"]) for r in active_rows), default=0.0),
    )
