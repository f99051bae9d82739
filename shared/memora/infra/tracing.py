"""OpenTelemetry tracing for every Memora process, off unless the standard `OTEL_*` variables ask
for it (docs/operations.md, Tracing).

On when `OTEL_SDK_DISABLED` is not `true` and an exporter is named: `OTEL_TRACES_EXPORTER`
(`otlp`, `console`; `none` is off) or an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). Then `configure_tracing` installs, once per process, a
tracer provider named after the process (`OTEL_SERVICE_NAME` overrides it) and the official
instrumentations of Celery (the trace context travels in the task headers, so a batch's stages
are one trace), Redis and httpx, plus PostgreSQL spans (`memora.infra.pg_tracing`): the SDK's
side, `memora.infra.tracing_sdk`, is imported only then. Off, nothing is imported or
installed: no overhead. The web apps add FastAPI's (services.api.tracing).

Database and Redis calls made outside any request or task (the broker's polling, the pool's
checks, metrics scrapes) would each be a trace of one span: they are not sampled.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("memora.tracing")

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def tracing_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the `OTEL_*` variables turn tracing on (the module's docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = exporter_names(environ)
    if exporters:
        return exporters != ["none"]
    return any(environ.get(name, "").strip() for name in _ENDPOINTS)


def exporter_names(environ: Mapping[str, str] = os.environ) -> list[str]:
    """`OTEL_TRACES_EXPORTER`'s list, lower case."""
    raw = environ.get("OTEL_TRACES_EXPORTER", "")
    return [name.strip().lower() for name in raw.split(",") if name.strip()]


def check_tracing_settings() -> None:
    """Raises ValueError when tracing is asked for with settings it cannot follow (an OTLP
    protocol other than http/protobuf, an unknown exporter): for a process to stop at start
    (a Celery worker's main process) rather than run untraced."""
    if tracing_requested():
        from memora.infra import tracing_sdk

        tracing_sdk.exporters_from_env(exporter_names())


@dataclass
class _Tracing:
    provider: TracerProvider
    instrumentors: list[Any] = field(default_factory=list)


_active: _Tracing | None = None


def active_provider() -> TracerProvider | None:
    """The provider `configure_tracing` installed in this process, None while tracing is off."""
    return _active.provider if _active else None


def configure_tracing(
    service_name: str, *, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """Turn tracing on in this process when the `OTEL_*` variables ask for it (or `exporter` is
    given: tests), once; returns the provider, or None when tracing stays off. Called at each
    process's start: the apps' factories, and each Celery worker process (after the fork)."""
    global _active
    if _active is not None:
        return _active.provider
    if exporter is None and not tracing_requested():
        return None
    from memora.infra import tracing_sdk

    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or service_name
    _active = _Tracing(*tracing_sdk.start(name, exporter, exporter_names()))
    log.info("tracing on: service %s", name)
    return _active.provider


def shutdown_tracing() -> None:
    """Remove the instrumentations and flush the provider (tests; processes exit instead)."""
    global _active
    if _active is None:
        return
    from memora.infra import tracing_sdk

    tracing_sdk.stop(_active.provider, _active.instrumentors)
    _active = None
