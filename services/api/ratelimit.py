"""Rate limits with the `limits` package, counted in Redis (shared by every replica): per key,
and failed authentications per client address.

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

from memora.basics.config import Settings

log = logging.getLogger("memora.api.ratelimit")
STRATEGIES: dict[str, type[RateLimiter]] = {
    "moving-window": MovingWindowRateLimiter,
    "fixed-window": FixedWindowRateLimiter,
    "sliding-window-counter": SlidingWindowCounterRateLimiter,
}
NAMESPACE = "api"  # the first part of every counter's name (per-key limits)
AUTH_FAILURES = "auth-failures"  # that of the failed-authentication counters
PAUSE_AFTER_FAILURE = 5.0  # seconds without asking the storage after it failed
REDIS_TIMEOUT = 0.5  # seconds; a slow Redis must not stall requests


class Limiter:
    def __init__(
        self,
        spec: str,
        storage_url: str,
        strategy: str = "moving-window",
        namespace: str = NAMESPACE,
    ) -> None:
        self.limits: list[RateLimitItem] = parse_many(spec)
        self.namespace = namespace
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
        return self._check(identity, count=True)

    def exhausted(self, identity: str) -> int | None:
        """Like `retry_after` without counting: the seconds to wait when one more is refused."""
        return self._check(identity, count=False)

    def _check(self, identity: str, *, count: bool) -> int | None:
        if time.monotonic() < self._paused_until:
            return None
        check = self.limiter.hit if count else self.limiter.test
        try:
            for limit in self.limits:
                if not check(limit, self.namespace, identity):
                    stats = self.limiter.get_window_stats(limit, self.namespace, identity)
                    return max(1, math.ceil(stats.reset_time - time.time()))
        except Exception as exc:  # the storage is down or misbehaves: let requests through
            with self._lock:
                if time.monotonic() >= self._paused_until:
                    log.warning("rate limit storage failed, not limiting for a while: %r", exc)
                    self._paused_until = time.monotonic() + PAUSE_AFTER_FAILURE
        return None

    def describe(self) -> str:
        return "; ".join(str(limit) for limit in self.limits)


def limiter_from_settings(settings: Settings) -> Limiter | None:
    """The per-key limiter (MEMORA_RATE_LIMIT); None when it is off."""
    return _from_spec(settings, settings.rate_limit, NAMESPACE)


def failure_limiter_from_settings(settings: Settings) -> Limiter | None:
    """The failed-authentication limiter (MEMORA_AUTH_FAILURE_LIMIT); None when it is off."""
    return _from_spec(settings, settings.auth_failure_limit, AUTH_FAILURES)


def _from_spec(settings: Settings, spec: str, namespace: str) -> Limiter | None:
    if not spec.strip():
        return None
    url = settings.rate_limit_storage_url or settings.broker_url or "memory://"
    return Limiter(spec, url, settings.rate_limit_strategy, namespace)
