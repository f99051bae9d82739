"""Why a lifecycle operation refused: each carries the HTTP status and code the API answers."""

from __future__ import annotations

from typing import Any


class LifecycleError(Exception):
    status = 400

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details or {}


class Invalid(LifecycleError):
    status = 422


class NotFound(LifecycleError):
    status = 404


class Conflict(LifecycleError):
    status = 409


class Gone(LifecycleError):
    status = 410
