"""Posting one document to the write API through memora_client (`store_batch`): transient
failures retried (tenacity) after the server's Retry-After, else with exponential back-off; a
refused document reported, not raised. The backfill keeps its own retry policy (408 and every
5xx too, waits cut short by Ctrl-C, Retry-After waits counted), so the client's is off."""

from __future__ import annotations

import threading
from typing import NamedTuple

import httpx
from pydantic import ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity import wait_exponential as exponential

from memora.interchange.archives import Document
from memora_client import APIError, MemoraClient, MemoraConnectionError
from memora_client.errors import retry_after
from services.cli.backfill.options import BackfillError
from services.cli.backfill.summary import Summary

RETRIED_STATUSES = (408, 429)  # and every 5xx
__all__ = ["Posted", "Poster", "connect", "retry_after"]  # retry_after: the client's
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
        self.memora = MemoraClient(http_client=client, max_retries=0)
        self.append = append
        self.backfill = priority == "backfill"
        self.retries = retries
        self.summary = summary
        self.stop = stop
        self._lock = threading.Lock()

    def post(self, doc: Document) -> Posted:
        retrying = Retrying(
            retry=retry_if_exception_type(_Retryable),
            stop=stop_after_attempt(self.retries + 1),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, doc)
        except _Retryable as exc:
            raise BackfillError(f"cannot post {doc.document_id!r}: {exc}") from exc

    def _attempt(self, doc: Document) -> Posted:
        try:
            answer = self.memora.store_batch(
                doc.agent_id,
                [i.model_dump(mode="json", exclude_none=True) for i in doc.items],
                doc.conversation if self.append else doc.document_id,
                update_mode="append" if self.append else "replace",
                backfill=self.backfill,
            )
        except MemoraConnectionError as exc:
            cause = exc.__cause__ or exc
            raise _Retryable(f"{type(cause).__name__}: {cause}") from exc
        except APIError as exc:
            return self._refused(exc)
        except ValidationError as exc:  # an item the API's model would refuse as well
            return Posted("failed", None, f"invalid document: {exc}"[:500])
        return Posted(answer.status, str(answer.operation_id), None)

    def _refused(self, exc: APIError) -> Posted:
        status, text = exc.status, exc.response.text if exc.response is not None else str(exc)
        if status in (401, 403):  # every other document would fail the same way
            raise BackfillError(f"the API refused the key: HTTP {status} {text[:200]}")
        if status >= 500 or status in RETRIED_STATUSES:
            wait = exc.retry_after if status in (429, 503) else None
            raise _Retryable(f"HTTP {status}: {text[:200]}", wait)
        return Posted("failed", None, f"HTTP {status}: {text[:500]}")

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
