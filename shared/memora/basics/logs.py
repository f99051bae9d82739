"""Logging for every Memora process: one stdlib root handler whose formatter is structlog's.

`MEMORA_LOG_FORMAT=text` (default) prints readable lines, `json` one JSON object per line for a
log pipeline. Either way the fields a call passes with `extra={...}` (operation, stage,
attempt, job, …) are printed with the message, for Memora's own loggers and third-party ones
alike: `log.info("stage done", extra={"stage": "embed", "operation": op_id})`.

Each line carries the current trace's `trace_id` and `span_id` (memora.infra.tracing): JSON
lines always (empty strings while no span is current, tracing off included), text lines when
there is one.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog
from opentelemetry import trace
from structlog.typing import Processor

LogFormat = Literal["text", "json"]
# Libraries whose INFO lines are noise next to Memora's own (httpx2: Starlette's test client).
_QUIET = (
    "httpx",
    "httpx2",
    "httpcore",
    "urllib3",
    "alembic.runtime.migration",
    "celery.redirected",
)


def _drop_formatting_leftovers(
    _logger: object, _name: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Another formatter that saw the record first (a test runner's) leaves `message` and
    `asctime` on it; they are not fields of the call."""
    event.pop("message", None)
    event.pop("asctime", None)
    return event


def _trace_ids(always: bool) -> Processor:
    def add(
        _logger: object, _name: str, event: structlog.typing.EventDict
    ) -> structlog.typing.EventDict:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            event["trace_id"] = trace.format_trace_id(context.trace_id)
            event["span_id"] = trace.format_span_id(context.span_id)
        elif always:
            event["trace_id"] = event["span_id"] = ""
        return event

    return add


def formatter(fmt: LogFormat) -> structlog.stdlib.ProcessorFormatter:
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(
            colors=False, pad_event_to=0, exception_formatter=structlog.dev.plain_traceback
        )
    )
    pre_chain: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),  # the `extra=` fields
        _drop_formatting_leftovers,
        _trace_ids(always=fmt == "json"),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        pre_chain.append(structlog.processors.format_exc_info)
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre_chain,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )


class _MemoraHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """Marks the handler `configure` installed, so that calling it again replaces only it."""


def configure(fmt: LogFormat = "text", level: str | int = "INFO") -> None:
    """Install Memora's handler (stderr) on the root logger, replacing an earlier one of its
    own and leaving other handlers (a test runner's) alone; uvicorn's loggers go through it."""
    handler = _MemoraHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _MemoraHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
