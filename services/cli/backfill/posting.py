"""Posting one document to the write API: transient failures retried (tenacity) after the
server's Retry-After, else with exponential back-off; a refused document reported, not raised."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity import wait_exponential as exponential

from memora.interchange.archives import Document
from services.cli.backfill.options import BackfillError
from services.cli.backfill.summary import Summary

RETRIED_STATUSES = (408, 429)  # and every 5xx
MAX_RETRY_AFTER = 300.0  # seconds: a longer Retry-After is waited this long, then retried


class Posted(NamedTuple):
    """The API's answer to one document; outcome "failed" for a refused one."""

    outcome: str
    operation_id: str | None
    error: str | None


class _Retryable(Exception):
    """A transient failure: connection error, 408, 429 or 5xx (with its Retry-After)."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.retry_after = retry_after


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None without one."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def connect(api_url: str, timeout: float, api_key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    return httpx.Client(base_url=api_url, timeout=timeout, headers=headers)


class Poster:
    """POST /api/memories/batch for one document at a time, from several threads. Counts the
    Retry-After waits in the summary; `stop` set cuts a wait short (BackfillError)."""

    _backoff = exponential(multiplier=0.5, max=30.0)

    def __init__(
        self,
        client: httpx.Client,
        priority: str,
        retries: int,
        summary: Summary,
        stop: threading.Event,
        *,
        append: bool = False,
    ) -> None:
        self.client = client
        self.append = append
        self.headers = {"X-Memora-Priority": priority}
        self.retries = retries
        self.summary = summary
        self.stop = stop
        self._lock = threading.Lock()

    def post(self, doc: Document) -> Posted:
        body = {
            "agent_id": doc.agent_id,
            "document_id": doc.conversation if self.append else doc.document_id,
            "items": [i.model_dump(mode="json", exclude_none=True) for i in doc.items],
        }
        if self.append:
            body["update_mode"] = "append"
        retrying = Retrying(
            retry=retry_if_exception_type(_Retryable),
            stop=stop_after_attempt(self.retries + 1),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, body)
        except _Retryable as exc:
            raise BackfillError(f"cannot post {doc.document_id!r}: {exc}") from exc

    def _attempt(self, body: dict[str, Any]) -> Posted:
        try:
            r = self.client.post("/api/memories/batch", json=body, headers=self.headers)
        except httpx.TransportError as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        if r.status_code == 200:
            answer = r.json()
            return Posted(str(answer["status"]), str(answer["operation_id"]), None)
        if r.status_code in (401, 403):  # every other document would fail the same way
            raise BackfillError(f"the API refused the key: HTTP {r.status_code} {r.text[:200]}")
        if r.status_code >= 500 or r.status_code in RETRIED_STATUSES:
            wait = retry_after(r) if r.status_code in (429, 503) else None
            raise _Retryable(f"HTTP {r.status_code}: {r.text[:200]}", wait)
        return Posted("failed", None, f"HTTP {r.status_code}: {r.text[:500]}")

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it sent one (capped), else exponential back-off."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            wait = min(exc.retry_after, MAX_RETRY_AFTER)
            with self._lock:
                self.summary.retry_after_waits += 1
                self.summary.retry_after_seconds += wait
            return wait
        return float(self._backoff(state))

    def _sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise BackfillError("stopped while waiting to retry")
