"""Exceptions: every error answer of the API becomes an `APIError` subclass carrying its code.

The API answers errors as `{"error": {"code", "message", "details"}}`; `code` is the stable,
machine-readable part (`not_found`, `validation_error`, `rate_limited`, ...).
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class MemoraError(Exception):
    """The base class of every exception this package raises."""


class MemoraConnectionError(MemoraError):
    """The server could not be reached (connection refused, DNS, timeout...)."""


class APIError(MemoraError):
    """The API answered with an error status.

    Attributes: `status` (HTTP status), `code` (the API's error code), `message`, `details`
    (for `validation_error`, the list of failed fields), `retry_after` (seconds, when the
    answer said) and `response` (the `httpx.Response`).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        retry_after: float | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.details = status, code, message, details
        self.retry_after = retry_after
        self.response = response


class BadRequestError(APIError):
    """400: the body is not valid JSON (`invalid_json`)."""


class AuthenticationError(APIError):
    """401: no API key, or one that is unknown, expired or revoked (`unauthorized`)."""


class PermissionDeniedError(APIError):
    """403: the key may not do this (`forbidden`)."""


class NotFoundError(APIError):
    """404: no such operation, document, memory... (`not_found`, `memory_not_found`...)."""


class ConflictError(APIError):
    """409: `conflict`, `message_conflict`, `too_many_matches`..."""


class GoneError(APIError):
    """410: past its retention period (`retention_expired`)."""


class PayloadTooLargeError(APIError):
    """413: the body is too large (`payload_too_large`)."""


class UnprocessableError(APIError):
    """422: the request failed validation (`validation_error` and route-specific codes)."""


class RateLimitedError(APIError):
    """429: too many requests for this API key (`rate_limited`); see `retry_after`."""


class ServerError(APIError):
    """5xx: the server failed."""


class UpstreamError(ServerError):
    """502: an upstream service (the LLM) answered badly."""


class ServiceUnavailableError(ServerError):
    """503: a dependency (database, LLM, query service) is unavailable; retry later."""


class OperationFailedError(MemoraError):
    """`wait_for`: the operation ended `failed` (or `superseded`); `operation` holds it."""

    def __init__(self, operation: Any) -> None:
        super().__init__(
            f"operation {operation.id} ended {operation.status}"
            + (f": {operation.error}" if operation.error else "")
        )
        self.operation = operation


class OperationTimeoutError(MemoraError):
    """`wait_for`: the operation did not finish in time; `operation` is its last state."""

    def __init__(self, operation: Any, timeout: float) -> None:
        super().__init__(f"operation {operation.id} still {operation.status} after {timeout}s")
        self.operation = operation


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLargeError,
    422: UnprocessableError,
    429: RateLimitedError,
    502: UpstreamError,
    503: ServiceUnavailableError,
}


def retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP date, RFC 9110 §10.2.3; a
    date in the past is 0); None without one, or with one that cannot be read."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from(response: httpx.Response) -> APIError:
    """The exception for an error answer, from its JSON body (or its status alone)."""
    code, message, details = "http_error", response.reason_phrase or "error", None
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code", code))
        message = str(error.get("message", message))
        details = error.get("details")
    status = response.status_code
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    return cls(status, code, message, details, retry_after(response), response)
