"""The OpenTelemetry SDK's side of memora.infra.tracing, imported only when tracing is on: the
exporters `OTEL_TRACES_EXPORTER` names, the sampler, and the provider with the instrumentations.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

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

PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def exporters_from_env(
    names: Sequence[str], environ: Mapping[str, str] = os.environ
) -> list[SpanExporter]:
    """The exporters `OTEL_TRACES_EXPORTER` names (`names`; default `otlp`: OTLP over
    HTTP/protobuf, configured by the exporter itself from `OTEL_EXPORTER_OTLP_*`)."""
    exporters: list[SpanExporter] = []
    for name in names or ["otlp"]:
        if name == "otlp":
            protocol = next(
                (environ[p] for p in PROTOCOL_VARIABLES if environ.get(p)), "http/protobuf"
            )
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


def start(
    service_name: str, exporter: SpanExporter | None, exporter_names: Sequence[str]
) -> tuple[TracerProvider, list[BaseInstrumentor]]:
    """A provider named `service_name` exporting to `exporter` (at once), else to the
    exporters `exporter_names` (in batches), made the global one, and the instrumentations
    installed with it."""
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    provider.sampler = QuietRoots(provider.sampler)  # before any tracer is made
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        for each in exporters_from_env(exporter_names):
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
    return provider, instrumentors


def stop(provider: TracerProvider, instrumentors: list[BaseInstrumentor]) -> None:
    for instrumentor in instrumentors:
        instrumentor.uninstrument()
    pg_tracing.uninstall()
    provider.shutdown()
