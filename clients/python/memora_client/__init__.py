"""Python client of Memora's HTTP API: `MemoraClient` (sync) and `AsyncMemoraClient` (async),
with the same methods, typed models (`memora_client.models`) and exceptions carrying the API's
error code (`memora_client.errors`). See docs/client.md."""

from memora_client._async import AsyncMemoraClient
from memora_client._retries import RetryPolicy
from memora_client._sync import MemoraClient
from memora_client.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    GoneError,
    MemoraConnectionError,
    MemoraError,
    NotFoundError,
    OperationFailedError,
    OperationTimeoutError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
    UnprocessableError,
    UpstreamError,
)
from memora_client.models import MemoryItem, Message, TimeRange

__version__ = "0.1.0"
__all__ = [
    "APIError",
    "AsyncMemoraClient",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "GoneError",
    "MemoraClient",
    "MemoraConnectionError",
    "MemoraError",
    "MemoryItem",
    "Message",
    "NotFoundError",
    "OperationFailedError",
    "OperationTimeoutError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RetryPolicy",
    "ServerError",
    "ServiceUnavailableError",
    "TimeRange",
    "UnprocessableError",
    "UpstreamError",
]
