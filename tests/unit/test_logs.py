"""Structured logs: the `extra` fields reach the output in both formats; the request log."""

from __future__ import annotations

import io
import json
import logging

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from memora.basics import logs
from memora.basics.config import Settings
from services.api.metrics import install_metrics, note_operation


def _render(fmt: logs.LogFormat, record: logging.LogRecord) -> str:
    return logs.formatter(fmt).format(record)


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("memora.pipeline", logging.INFO, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_text_format_prints_message_and_extra_fields() -> None:
    line = _render("text", _record("stage %s done", "embed", operation="op-1", attempt=2))
    assert "stage embed done" in line
    assert "operation=op-1" in line and "attempt=2" in line
    assert "memora.pipeline" in line and "info" in line


def test_json_format_is_one_object_with_the_fields() -> None:
    body = json.loads(_render("json", _record("stage done", operation="op-1", stage="links")))
    assert body["event"] == "stage done"
    assert body["operation"] == "op-1" and body["stage"] == "links"
    assert body["level"] == "info" and body["logger"] == "memora.pipeline"
    assert body["timestamp"].endswith("Z")


def test_configure_replaces_only_its_own_handler() -> None:
    root = logging.getLogger()
    other = logging.NullHandler()
    root.addHandler(other)
    try:
        logs.configure("json")
        logs.configure("text")
        ours = [h for h in root.handlers if isinstance(h, logs._MemoraHandler)]
        assert len(ours) == 1 and other in root.handlers
    finally:
        root.removeHandler(other)
        for h in [h for h in root.handlers if isinstance(h, logs._MemoraHandler)]:
            root.removeHandler(h)


def test_request_log_carries_method_route_status_duration_and_operation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FastAPI()
    app.state.settings = Settings(database_url=None, broker_url=None)

    @app.post("/things/{thing_id}")
    def make(thing_id: str, request: Request) -> dict[str, str]:
        note_operation(request, "op-42")
        return {"id": thing_id}

    install_metrics(app, "test")
    with caplog.at_level(logging.INFO, logger="memora.request"), TestClient(app) as client:
        assert client.post("/things/7").status_code == 200
    [record] = [r for r in caplog.records if r.name == "memora.request"]
    fields = record.__dict__
    assert fields["method"] == "POST" and fields["route"] == "/things/{thing_id}"
    assert fields["status"] == 200 and fields["duration_ms"] >= 0
    assert fields["operation"] == "op-42"
    assert "operation=op-42" in io.StringIO(_render("text", record)).getvalue()


def test_configure_takes_a_numeric_level_as_celery_passes_it() -> None:
    root = logging.getLogger()
    try:
        logs.configure("text", logging.WARNING)  # Celery's setup_logging signal sends an int
        assert root.level == logging.WARNING
    finally:
        for h in [h for h in root.handlers if isinstance(h, logs._MemoraHandler)]:
            root.removeHandler(h)
        root.setLevel(logging.WARNING)
