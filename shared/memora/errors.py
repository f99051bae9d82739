"""Typed stage failures: the worker retries the first kind with back-off, never the second."""


class StageError(Exception):
    """Base class for failures raised by pipeline stages."""


class TransientStageError(StageError):
    """Worth retrying: a dependency was unavailable or answered 'try later'."""


class PermanentStageError(StageError):
    """Retrying cannot help (invalid input, an answer that failed validation repeatedly)."""
