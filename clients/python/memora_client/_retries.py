"""The clients' retries: which failures are tried again, and how long to wait before each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import tenacity

from memora_client.errors import MemoraConnectionError, RateLimitedError, ServiceUnavailableError


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, RateLimitedError | ServiceUnavailableError):
        return True
    # Only a connection that was never made: the request cannot have reached the server.
    return isinstance(exc, MemoraConnectionError) and isinstance(exc.__cause__, httpx.ConnectError)


class _WaitRetryAfter(tenacity.wait.wait_base):
    """The answer's Retry-After (capped at `maximum`), else exponential back-off with jitter."""

    def __init__(self, backoff: float, maximum: float) -> None:
        self.maximum = maximum
        self.fallback = tenacity.wait_exponential_jitter(initial=backoff, max=maximum)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        after = getattr(exc, "retry_after", None)
        if after is not None:
            return float(min(after, self.maximum))
        return float(self.fallback(retry_state))


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of 429 and 503 answers (and of connections refused): `max_retries` more tries,
    each after the answer's Retry-After, else after exponential back-off from `backoff` seconds;
    no wait longer than `max_backoff`."""

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0

    def options(self) -> dict[str, Any]:
        return {
            "retry": tenacity.retry_if_exception(_retryable),
            "wait": _WaitRetryAfter(self.backoff, self.max_backoff),
            "stop": tenacity.stop_after_attempt(self.max_retries + 1),
            "reraise": True,
        }
