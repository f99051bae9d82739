"""Per-key rate limits with the `limits` package, counted in Redis (shared by every replica).

A limiter that cannot reach its storage lets requests through: an outage of Redis must not
take the API down with it. It logs the failure and stops asking for a few seconds, so that
requests do not each wait for a connection timeout meanwhile.
"""

from __future__ import annotations

import logging
import math
import threading
import time

from limits import RateLimitItem, parse_many
from limits.storage import storage_from_string
from limits.strategies import (
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
    RateLimiter,
    SlidingWindowCounterRateLimiter,
)

from memora.config import Settings

log = logging.getLogger("memora.api.ratelimit")
STRATEGIES: dict[str, type[RateLimiter]] = {
    "moving-window": MovingWindowRateLimiter,
    "fixed-window": FixedWindowRateLimiter,
    "sliding-window-counter": SlidingWindowCounterRateLimiter,
}
NAMESPACE = "api"  # the first part of every counter's name
PAUSE_AFTER_FAILURE = 5.0  # seconds without asking the storage after it failed
REDIS_TIMEOUT = 0.5  # seconds; a slow Redis must not stall requests


class Limiter:
    def __init__(self, spec: str, storage_url: str, strategy: str = "moving-window") -> None:
        self.limits: list[RateLimitItem] = parse_many(spec)
        options: dict[str, float | str | bool] = {}
        if storage_url.startswith("redis"):  # redis://, rediss://, redis+unix://
            options = {
                "socket_connect_timeout": REDIS_TIMEOUT,
                "socket_timeout": REDIS_TIMEOUT,
                "key_prefix": "memora:ratelimit",
            }
        storage = storage_from_string(storage_url, wrap_exceptions=True, **options)
        self.limiter = STRATEGIES[strategy](storage)
        self._paused_until = 0.0
        self._lock = threading.Lock()

    def retry_after(self, identity: str) -> int | None:
        """Count one request of `identity`; None when it may go on, else the seconds to wait."""
        if time.monotonic() < self._paused_until:
            return None
        try:
            for limit in self.limits:
                if not self.limiter.hit(limit, NAMESPACE, identity):
                    reset = self.limiter.get_window_stats(limit, NAMESPACE, identity).reset_time
                    return max(1, math.ceil(reset - time.time()))
        except Exception as exc:  # the storage is down or misbehaves: let requests through
            with self._lock:
                if time.monotonic() >= self._paused_until:
                    log.warning("rate limit storage failed, not limiting for a while: %r", exc)
                    self._paused_until = time.monotonic() + PAUSE_AFTER_FAILURE
        return None

    def describe(self) -> str:
        return "; ".join(str(limit) for limit in self.limits)


def limiter_from_settings(settings: Settings) -> Limiter | None:
    if not settings.rate_limit.strip():
        return None
    url = settings.rate_limit_storage_url or settings.broker_url or "memory://"
    return Limiter(settings.rate_limit, url, settings.rate_limit_strategy)
