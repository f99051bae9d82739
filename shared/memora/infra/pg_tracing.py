"""PostgreSQL client spans for psycopg 3 connections, while tracing is on (memora.infra.tracing).

The official opentelemetry-instrumentation-psycopg is not used: its newest release pins an
opentelemetry-api older than the one FastAPI brings (see docs/operations.md, Tracing). This
does the same small thing: connections made while tracing is on get a cursor class that wraps
each `execute` and `executemany` in a CLIENT span named after the statement's verb,
with the semantic conventions' attributes (the statement's text, never its parameters).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import wrapt
from opentelemetry.instrumentation.utils import unwrap
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, SpanKind, Tracer
from psycopg import sql

_MAX_STATEMENT = 4096
_tracer: Tracer | None = None


def _statement(query: Any, conn: psycopg.Connection[Any]) -> str:
    if isinstance(query, sql.Composable):
        return query.as_string(conn)
    if isinstance(query, bytes):
        return query.decode(errors="replace")
    return str(query)


def _span(cursor: psycopg.Cursor[Any], query: Any) -> AbstractContextManager[Span]:
    text = _statement(query, cursor.connection)
    verb = text.lstrip().split(None, 1)[0].upper() if text.strip() else "postgresql"
    info = cursor.connection.info
    assert _tracer is not None
    return _tracer.start_as_current_span(
        verb,
        kind=SpanKind.CLIENT,
        attributes={
            "db.system.name": "postgresql",
            "db.operation.name": verb,
            "db.query.text": text[:_MAX_STATEMENT],
            "db.namespace": info.dbname,
            "server.address": info.host,
            "server.port": info.port,
        },
    )


class TracedCursor(psycopg.Cursor[Any]):
    """A cursor whose statements are spans."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> TracedCursor:
        if _tracer is None:
            return super().execute(query, params, **kwargs)
        with _span(self, query):
            return super().execute(query, params, **kwargs)

    def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:
        if _tracer is None:
            return super().executemany(query, params_seq, **kwargs)
        with _span(self, query):
            return super().executemany(query, params_seq, **kwargs)


def _traced_connect(
    wrapped: Any, _instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    conn = wrapped(*args, **kwargs)
    if conn.cursor_factory is psycopg.Cursor:  # a caller's own cursor class stays
        conn.cursor_factory = TracedCursor
    return conn


def install(provider: TracerProvider) -> None:
    """Connections made from now on (pools included) are traced."""
    global _tracer
    if _tracer is None:
        wrapt.wrap_function_wrapper(psycopg.Connection, "connect", _traced_connect)
        wrapt.wrap_function_wrapper(psycopg, "connect", _traced_connect)
    _tracer = provider.get_tracer("memora.postgresql")


def uninstall() -> None:
    """Connections made from now on are not traced; traced ones stop making spans."""
    global _tracer
    if _tracer is not None:
        unwrap(psycopg.Connection, "connect")
        unwrap(psycopg, "connect")
    _tracer = None
