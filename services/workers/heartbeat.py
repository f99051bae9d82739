"""Beat's heartbeat: a periodic task (beat_schedule, maintenance queue) that stamps the time in
the broker's Redis. The write API's /metrics exports it as
memora_beat_last_heartbeat_timestamp_seconds and MemoraBeatHeartbeatStale fires when it stops:
beat is down, or no worker consumes the maintenance queue (the reconciler's, too)."""

from __future__ import annotations

import redis

from memora.monitoring import record_beat_heartbeat
from services.workers.celery_app import app
from services.workers.queues import HEARTBEAT_TASK


@app.task(name=HEARTBEAT_TASK, ignore_result=True)
def beat_heartbeat() -> float:
    with redis.Redis.from_url(app.conf.broker_url, socket_timeout=5) as client:
        return record_beat_heartbeat(client)
