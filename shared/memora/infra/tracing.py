"""OpenTelemetry tracing for every Memora process, off unless the standard `OTEL_*` variables ask
for it (docs/operations.md, Tracing).

On when `OTEL_SDK_DISABLED` is not `true` and an exporter is named: `OTEL_TRACES_EXPORTER`
(`otlp`, `console`; `none` is off) or an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). Then `configure_tracing` installs, once per process, a
tracer provider named after the process (`OTEL_SERVICE_NAME` overrides it) and the official
instrumentations of Celery (the trace context travels in the task headers, so a batch's stages
are one trace), Redis and httpx, plus PostgreSQL spans (`memora.infra.pg_tracing`). Off,
nothing is installed: no overhead. The web apps add FastAPI's (services.api.tracing).

Database and Redis calls made outside any request or task (the broker's polling, the pool's
checks, metrics scrapes) would each be a trace of one span: they are not sampled.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes

from memora.infra import pg_tracing

log = logging.getLogger("memora.tracing")

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def tracing_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the `OTEL_*` variables turn tracing on (the module's docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = _exporter_names(environ)
    if exporters:
        return exporters != ["none"]
    return any(environ.get(name, "").strip() for name in _ENDPOINTS)


def _exporter_names(environ: Mapping[str, str]) -> list[str]:
    raw = environ.get("OTEL_TRACES_EXPORTER", "")
    return [name.strip().lower() for name in raw.split(",") if name.strip()]


def exporters_from_env(environ: Mapping[str, str] = os.environ) -> list[SpanExporter]:
    """The exporters `OTEL_TRACES_EXPORTER` names (default `otlp`: OTLP over HTTP/protobuf,
    configured by the exporter itself from `OTEL_EXPORTER_OTLP_*`)."""
    exporters: list[SpanExporter] = []
    for name in _exporter_names(environ) or ["otlp"]:
        if name == "otlp":
            protocol = next((environ[p] for p in _PROTOCOLS if environ.get(p)), "http/protobuf")
            if protocol.strip() != "http/protobuf":
                raise ValueError(
                    f"OTLP protocol {protocol!r} is not supported: Memora exports OTLP over "
                    "http/protobuf (port 4318 of a collector)"
                )
            exporters.append(OTLPSpanExporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name != "none":
            raise ValueError(f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (otlp, console)")
    return exporters


class QuietRoots(Sampler):
    """Drops a database or Redis client span that starts a trace (no request or task around
    it); everything else is decided by `inner` (`OTEL_TRACES_SAMPLER`, parent-based by
    default)."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        attrs = attributes or {}
        if not parent.is_valid and ("db.system" in attrs or "db.system.name" in attrs):
            return SamplingResult(Decision.DROP)
        return self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"QuietRoots{{{self.inner.get_description()}}}"


@dataclass
class _Tracing:
    provider: TracerProvider
    instrumentors: list[BaseInstrumentor] = field(default_factory=list)


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
    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or service_name
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.sampler = QuietRoots(provider.sampler)  # before any tracer is made
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        for each in exporters_from_env():
            provider.add_span_processor(BatchSpanProcessor(each))
    trace.set_tracer_provider(provider)  # for code that asks the API (the first one stays)
    instrumentors: list[BaseInstrumentor] = [
        CeleryInstrumentor(),  # type: ignore[no-untyped-call]
        RedisInstrumentor(),
        HTTPXClientInstrumentor(),
    ]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    pg_tracing.install(provider)
    _active = _Tracing(provider, instrumentors)
    log.info("tracing on: service %s", name)
    return provider


def shutdown_tracing() -> None:
    """Remove the instrumentations and flush the provider (tests; processes exit instead)."""
    global _active
    if _active is None:
        return
    for instrumentor in _active.instrumentors:
        instrumentor.uninstrument()
    pg_tracing.uninstall()
    _active.provider.shutdown()
    _active = None
