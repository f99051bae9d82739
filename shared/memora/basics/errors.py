"""Typed failures.

- Stage failures: the worker retries the transient kind with back-off, never the permanent one.
- Refusals of a use case (`Refused` and its kinds): the request cannot be carried out as asked;
  each carries a code, a message and details, and its kind says what the edges answer (the
  API: the HTTP status; the CLI: an error line and exit status 1).
"""

from __future__ import annotations

from typing import Any, ClassVar


class StageError(Exception):
    """Base class for failures raised by pipeline stages."""


class TransientStageError(StageError):
    """Worth retrying: a dependency was unavailable or answered 'try later'."""


class PermanentStageError(StageError):
    """Retrying cannot help (invalid input, an answer that failed validation repeatedly)."""


class Refused(Exception):
    """A use case refused the request; nothing was written."""

    status: ClassVar[int] = 400

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details or {}


class Invalid(Refused):
    """The input is well-formed but not acceptable (limits, conflicting options)."""

    status = 422


class NotFound(Refused):
    status = 404


class Conflict(Refused):
    status = 409


class Gone(Refused):
    """It existed, but is past its retention period."""

    status = 410
