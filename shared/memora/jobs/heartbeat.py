"""beat_heartbeat: stamps the time in the broker's Redis. The write API's /metrics exports it as
memora_beat_last_heartbeat_timestamp_seconds and MemoraBeatHeartbeatStale fires when it stops:
beat is down, or no worker consumes the maintenance queue (the reconciler's, too)."""

from __future__ import annotations

import redis

from memora.jobs.base import JobContext, JobResult
from memora.pipeline.monitoring import record_beat_heartbeat


def run(ctx: JobContext) -> JobResult:
    with redis.Redis.from_url(ctx.settings.broker, socket_timeout=5) as client:
        record_beat_heartbeat(client)
    return JobResult(examined=1, changed=1)
