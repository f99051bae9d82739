"""Tracing's switch (the standard OTEL_* variables), its sampler, and the trace ids in log lines,
with spans kept by an in-memory exporter. The spans across processes: tests/integration/
test_tracing.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind, format_trace_id

from memora.basics import logs
from memora.infra import tracing, tracing_sdk

OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_SERVICE_NAME": "memora-api"}, False),  # a name alone exports nowhere
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_named(environ: dict[str, str], on: bool) -> None:
    assert tracing.tracing_requested(environ) is on


def _exporters(environ: dict[str, str]) -> list[object]:
    return list(tracing_sdk.exporters_from_env(tracing.exporter_names(environ), environ))


def test_exporters_follow_otel_traces_exporter() -> None:
    assert [type(e).__name__ for e in _exporters({})] == ["OTLPSpanExporter"]
    both = _exporters({"OTEL_TRACES_EXPORTER": "otlp, console"})
    assert isinstance(both[1], ConsoleSpanExporter) and len(both) == 2
    with pytest.raises(ValueError, match="grpc"):
        _exporters({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(ValueError, match="zipkin"):
        _exporters({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_settings_it_cannot_follow_are_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ValueError, match="http/protobuf"):
        tracing.check_tracing_settings()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    tracing.check_tracing_settings()  # off: nothing to follow


def test_off_by_default_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    connect = psycopg.connect
    assert tracing.configure_tracing("memora-api") is None
    assert tracing.active_provider() is None
    assert psycopg.connect is connect  # no PostgreSQL spans wrapped around connections


def test_off_the_tracing_sdk_is_not_even_imported() -> None:
    # (redis-py imports opentelemetry.sdk.metrics for its own observability: not ours)
    code = (
        "import sys, services.workers.tasks, services.api.app, services.api.query_app; "
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace', "
        "'opentelemetry.instrumentation', 'opentelemetry.exporter', 'memora.infra.tracing_sdk'))))"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environ
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=tracing_sdk.QuietRoots(ALWAYS_ON))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_database_calls_outside_a_request_or_task_are_not_traced() -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("test")
    for system in ("db.system", "db.system.name"):
        with tracer.start_as_current_span("BRPOP", kind=SpanKind.CLIENT, attributes={system: "x"}):
            pass
    with tracer.start_as_current_span("POST /api/memories/batch", kind=SpanKind.SERVER):  # noqa: SIM117
        with tracer.start_as_current_span(
            "INSERT", kind=SpanKind.CLIENT, attributes={"db.system.name": "postgresql"}
        ):
            pass
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["INSERT", "POST /api/memories/batch"]


def _json_line(message: str) -> dict[str, str]:
    record = logging.LogRecord("memora.worker", logging.INFO, __file__, 1, message, (), None)
    return json.loads(logs.formatter("json").format(record))  # type: ignore[no-any-return]


def test_log_lines_carry_the_current_trace_id() -> None:
    provider, exporter = _provider()
    with provider.get_tracer("test").start_as_current_span("run/memora.embed") as span:
        inside = _json_line("stage done")
    outside = _json_line("idle")
    (finished,) = exporter.get_finished_spans()
    assert finished.context is not None
    assert inside["trace_id"] == format_trace_id(finished.context.trace_id)
    assert inside["span_id"] == f"{span.get_span_context().span_id:016x}"
    assert outside["trace_id"] == outside["span_id"] == ""
    text = logs.formatter("text").format(
        logging.LogRecord("memora.worker", logging.INFO, __file__, 1, "idle", (), None)
    )
    assert "trace_id" not in text  # text lines name a trace only inside one
