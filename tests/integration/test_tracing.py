"""OpenTelemetry tracing through the deployed topology: the write API, the query service and one
real Celery worker process per ingest stage, each exporting OTLP over HTTP (the standard
`OTEL_*` variables, nothing else) to a collector the test runs; it keeps the spans in memory.
One POST /api/memories/batch is one trace through every stage, with the PostgreSQL and Redis
calls inside it, and the trace id is in the processes' log lines."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from memora.basics.config import Settings
from memora.basics.stages import INGEST_STAGES
from memora.infra.embedded import free_port
from tests.conftest import WORKER_ENV, wait_until

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int  # opentelemetry.proto's Span.SpanKind: 2 server, 3 client, 4 producer, 5 consumer
    attributes: dict[str, Any]


def _value(v: AnyValue) -> Any:
    field = v.WhichOneof("value")
    return getattr(v, field) if field else None


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP (protobuf) trace receiver on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=resource.get("service.name", ""),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self.lock:
            self.spans.extend(received)

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)


class _Receive(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.add(request)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join(10)


@pytest.fixture(scope="module")
def traced_stack(
    settings: Settings, redis_url: str, data_dir: Path, collector: Collector
) -> Iterator[Any]:
    """API, query service and ingest-stage workers, tracing on, JSON logs, on a Redis database
    of their own (not the suite's workers')."""
    from services.cli.stack import WORKER_QUEUES, Stack

    stack_settings = settings.model_copy(
        update={
            "broker_url": re.sub(r"/\d*$", "", redis_url) + "/8",
            "data_dir": data_dir / "traced-stack",
            "port": free_port(),
            "query_port": free_port(),
        }
    )
    stack = Stack(
        stack_settings,
        workers={s.value: WORKER_QUEUES[s.value] for s in INGEST_STAGES},
        with_beat=False,
        log_dir=data_dir / "traced-stack-logs",
        extra_env={
            **WORKER_ENV,
            "MEMORA_VISIBILITY_TIMEOUT": "120",
            "MEMORA_LOG_FORMAT": "json",
            "MEMORA_CROSS_ENCODER_MODEL": str(settings.cross_encoder_model),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "200",  # ms: spans reach the collector quickly
        },
    )
    with stack:
        stack.wait_ready(300)
        yield stack


def _url(stack: Any) -> str:
    return f"http://{stack.settings.host}:{stack.settings.port}"


def _server_span(collector: Collector, service: str, route: str) -> ReceivedSpan:
    def find() -> ReceivedSpan | None:
        return next(
            (
                s
                for s in collector.snapshot()
                if s.service == service and s.kind == 2 and s.attributes.get("http.route") == route
            ),
            None,
        )

    found: ReceivedSpan = wait_until(find, 60)
    return found


def _db_spans(spans: list[ReceivedSpan], system: str) -> list[ReceivedSpan]:
    return [
        s
        for s in spans
        if system in (s.attributes.get("db.system"), s.attributes.get("db.system.name"))
    ]


def test_one_batch_is_one_trace_through_every_stage(
    traced_stack: Any, collector: Collector, agent_id: str
) -> None:
    items = [
        {"content": "Ana: I moved to Porto to work at a bakery.", "event_date": "2024-05-01"},
        {"content": "Ben: Porto! Say hello to the river for me.", "event_date": "2024-05-01"},
    ]
    with httpx.Client(base_url=_url(traced_stack), timeout=60) as client:
        accepted = client.post(
            "/api/memories/batch",
            json={"agent_id": agent_id, "document_id": "porto", "items": items},
        )
        assert accepted.status_code == 200, accepted.text
        op = accepted.json()["operation_id"]
        wait_until(lambda: client.get(f"/api/operations/{op}").json()["status"] == "completed", 180)

    request = _server_span(collector, "memora-api", "/api/memories/batch")
    assert request.parent_id == ""  # the trace starts at the request
    stage_runs = {f"run/memora.{s.value}" for s in INGEST_STAGES}

    def whole_trace() -> list[ReceivedSpan] | None:
        spans = [s for s in collector.snapshot() if s.trace_id == request.trace_id]
        return spans if stage_runs <= {s.name for s in spans} else None

    spans: list[ReceivedSpan] = wait_until(whole_trace, 60)
    # every stage ran in a worker process, as a consumer span of the same trace
    runs = [s for s in spans if s.name in stage_runs]
    assert {s.service for s in runs} == {"memora-worker"}
    assert all(s.kind == 5 for s in runs)
    # each stage's task was published from inside the trace: the API's request for the first,
    # the stage before it for the others
    ids = {s.span_id for s in spans}
    assert all(s.parent_id in ids for s in spans if s is not request)
    # PostgreSQL from the API (the durable write) and from the workers; Redis: the broker
    postgres = _db_spans(spans, "postgresql")
    assert {"memora-api", "memora-worker"} <= {s.service for s in postgres}
    assert any(s.attributes["db.operation.name"] == "INSERT" for s in postgres)
    assert _db_spans(spans, "redis")

    # the trace id in the log lines of the stages' workers
    logs = traced_stack.log_dir
    traced_lines = [
        json.loads(line)
        for name in ("worker-extract", "worker-links")
        for line in (logs / f"{name}.log").read_text().splitlines()
        if request.trace_id in line
    ]
    assert traced_lines and all(line["trace_id"] == request.trace_id for line in traced_lines)


def test_a_forwarded_search_continues_the_trace_in_the_query_service(
    traced_stack: Any, collector: Collector, agent_id: str
) -> None:
    with httpx.Client(base_url=_url(traced_stack), timeout=60) as client:
        found = client.post("/api/search", json={"agent_id": agent_id, "query": "Porto"})
    assert found.status_code == 200, found.text

    query_side = _server_span(collector, "memora-query", "/api/search")

    def roots() -> list[ReceivedSpan]:
        snapshot = collector.snapshot()
        return [s for s in snapshot if s.trace_id == query_side.trace_id and s.parent_id == ""]

    # each process exports on its own schedule: the API's span, which ends last, may come later
    write_side = wait_until(roots, 30)
    assert [s.service for s in write_side] == ["memora-api"]  # the trace starts at the API
    assert _db_spans(
        [s for s in collector.snapshot() if s.trace_id == query_side.trace_id], "postgresql"
    )
