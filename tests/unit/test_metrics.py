"""Metric definitions and their recording: HTTP middleware labels, multiprocess aggregation over
forked processes (Celery's prefork pool), the LLM usage hook, pool and operation gauges."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from memora.basics import metrics
from memora.basics.config import Settings
from memora.nlp.llm import LLMCall, UsageRegistry
from services.api.errors import BodySizeLimit
from services.api.metrics import install_metrics


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _app() -> FastAPI:
    app = FastAPI()
    app.state.settings = Settings(metrics_cache_seconds=0)

    @app.get("/things/{thing_id}")
    def thing(thing_id: int) -> dict[str, int]:
        return {"id": thing_id}

    @app.post("/upload")
    def upload() -> dict[str, str]:
        return {}

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("boom")

    app.add_middleware(BodySizeLimit, max_bytes=10)
    install_metrics(app, "unit")
    return app


def test_requests_are_labelled_by_route_template_and_status() -> None:
    def count(route: str, status: str, method: str = "GET") -> float:
        return _value(
            "memora_http_requests_total", service="unit", method=method, route=route, status=status
        )

    before = {
        key: count(*key)
        for key in [
            ("/things/{thing_id}", "200"),
            ("/things/{thing_id}", "422"),
            ("unmatched", "404"),
            ("/boom", "500"),
            ("/upload", "413", "POST"),
        ]
    }
    with TestClient(_app(), raise_server_exceptions=False) as client:
        assert client.get("/things/1").status_code == 200
        assert client.get("/things/2").status_code == 200
        assert client.get("/things/x").status_code == 422
        assert client.get("/no/such/path").status_code == 404
        assert client.get("/boom").status_code == 500
        # refused by an outer middleware before routing: still labelled by its route
        assert client.post("/upload", content=b"x" * 100).status_code == 413
        exposition = client.get("/metrics")
    assert count("/things/{thing_id}", "200") - before[("/things/{thing_id}", "200")] == 2
    assert count("/things/{thing_id}", "422") - before[("/things/{thing_id}", "422")] == 1
    assert count("unmatched", "404") - before[("unmatched", "404")] == 1
    assert count("/boom", "500") - before[("/boom", "500")] == 1
    assert count("/upload", "413", "POST") - before[("/upload", "413", "POST")] == 1
    assert exposition.status_code == 200
    assert exposition.headers["content-type"].startswith("text/plain")
    assert "memora_http_request_duration_seconds_bucket" in exposition.text
    assert "/things/1" not in exposition.text  # raw paths never become labels


def test_llm_usage_listener_counts_calls_tokens_and_latency() -> None:
    usage = UsageRegistry()
    metrics.install_llm_hook(usage)
    metrics.install_llm_hook(usage)  # once per registry
    labels = {"operation": "think", "model": "unit-model"}
    before = _value("memora_llm_requests_total", **labels, outcome="ok")
    usage.record(LLMCall("think", "unit-model", "ok", 120, 30, 0.4))
    usage.record(LLMCall("think", "unit-model", "rate_limited", 0, 0, 0.1))
    assert _value("memora_llm_requests_total", **labels, outcome="ok") - before == 1
    assert _value("memora_llm_requests_total", **labels, outcome="rate_limited") >= 1
    assert _value("memora_llm_tokens_total", **labels, kind="prompt") >= 120
    assert _value("memora_llm_tokens_total", **labels, kind="completion") >= 30
    assert _value("memora_llm_request_duration_seconds_count", **labels) >= 2


def test_pool_and_operation_gauges() -> None:
    metrics.record_pool("unit", {"pool_size": 4, "pool_available": 1, "pool_max": 8})
    assert _value("memora_db_pool_connections", pool="unit", state="in_use") == 3
    assert _value("memora_db_pool_connections", pool="unit", state="max") == 8
    metrics.record_operations({"running": 2, "completed": 5}, {"embed": 2}, 12.5)
    assert _value("memora_operations", status="running") == 2
    assert _value("memora_operations", status="failed") == 0  # every status is exported
    assert _value("memora_operations_active", stage="embed") == 2
    assert _value("memora_operations_active", stage="links") == 0
    metrics.record_operations({}, {}, 0.0)
    assert _value("memora_operations_active", stage="embed") == 0


def test_metric_names_include_sample_suffixes() -> None:
    names = metrics.metric_names()
    assert {"memora_task_successes_total", "memora_ingest_lag_seconds_bucket"} <= names
    assert "memora_queue_depth" in names


_FORKED = textwrap.dedent(
    """
    import multiprocessing, os, sys
    from memora.basics import metrics

    def work(n):
        for _ in range(n):
            metrics.TASK_SUCCESSES.labels("extract", "extract").inc()
        metrics.TASKS_IN_PROGRESS.labels("extract").inc()
        metrics.observe_lag(2.0, backfill=True)

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=work, args=(n,)) for n in (3, 4, 5)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        metrics.mark_process_dead(procs[0].pid)
        sys.stdout.write(metrics.render()[0].decode())
    """
)


def test_prefork_processes_add_up_in_multiprocess_mode(tmp_path: Path) -> None:
    script = tmp_path / "forked.py"
    script.write_text(_FORKED)
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"))
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert 'memora_task_successes_total{queue="extract",stage="extract"} 12.0' in lines
    assert 'memora_ingest_lag_seconds_count{priority="backfill"} 3.0' in lines
    # live gauges forget the process marked dead
    assert 'memora_tasks_in_progress{stage="extract"} 2.0' in lines


def test_stale_files_of_other_processes_are_removed(tmp_path: Path) -> None:
    for name in ("counter_111.db", "gauge_livesum_111.db", f"counter_{os.getpid()}.db", "x.txt"):
        (tmp_path / name).write_text("")
    assert metrics.remove_stale_files(str(tmp_path), keep_pid=os.getpid()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"counter_{os.getpid()}.db", "x.txt"]


def test_requests_in_flight_leave_out_scrapes_and_probes() -> None:
    """memora_http_requests_in_progress scales the query pods (KEDA): a request being served
    counts; the scrape that reads the gauge and health probes do not."""
    app = FastAPI()
    app.state.settings = Settings(metrics_cache_seconds=0)

    def in_flight() -> float:
        return _value("memora_http_requests_in_progress", service="inflight")

    @app.get("/api/search")
    def search() -> dict[str, float]:
        return {"in_flight": in_flight()}

    @app.get("/health/live")
    def live() -> dict[str, float]:
        return {"in_flight": in_flight()}

    install_metrics(app, "inflight")
    client = TestClient(app)
    assert client.get("/api/search").json() == {"in_flight": 1.0}
    assert client.get("/health/live").json() == {"in_flight": 0.0}
    assert 'memora_http_requests_in_progress{service="inflight"} 0.0' in client.get("/metrics").text
    assert in_flight() == 0.0
