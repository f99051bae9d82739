"""docker-compose.yml, the Dockerfile and the Prometheus/Grafana files, validated offline (no
Docker engine here): services, dependencies, commands, ports, volumes, referenced files, and
dashboards that query only metrics the code defines."""

from __future__ import annotations

import importlib
import json
import re
import runpy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from memora import metrics
from memora.config import Settings
from memora.queues import Stage, all_queues, queue_for

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
METRIC = re.compile(r"\bmemora_[a-z0-9_]+")
WORKERS = {f"worker-{s.value}" for s in Stage}


@cache
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return command.split() if isinstance(command, str) else list(command)


def test_services_present() -> None:
    expected = {"postgres", "redis", "migrate", "api", "query", "beat", "flower"}
    expected |= {"prometheus", "grafana"} | WORKERS
    assert expected <= set(services())
    assert services()["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services()["redis"]["image"].startswith("redis:")


def test_dependencies_exist_and_wait_for_health_or_migration() -> None:
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services().items():
        depends = service.get("depends_on", {})
        entries = depends.items() if isinstance(depends, dict) else [(d, {}) for d in depends]
        for dependency, spec in entries:
            assert dependency in services(), f"{name} depends on unknown {dependency}"
            if spec:
                assert spec["condition"] in conditions
                if spec["condition"] == "service_healthy":
                    assert "healthcheck" in services()[dependency], dependency
    for name in ("api", "query", "beat", *WORKERS):
        depends = services()[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
    assert services()["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert _command(services()["migrate"]) == ["memora", "migrate"]
    assert services()["migrate"]["restart"] == "no"


def test_one_worker_service_per_queue_scalable() -> None:
    consumed: dict[str, str] = {}
    for name in WORKERS:
        service = services()[name]
        command = _command(service)
        assert command[:2] == ["memora", "worker"]
        if "--stage" in command:
            stage = Stage(command[command.index("--stage") + 1])
            queues = {queue_for(stage), queue_for(stage, backfill=True)}
        else:
            queues = set(command[command.index("--queues") + 1].split(","))
        for queue in queues:
            assert queue not in consumed
            consumed[queue] = name
        # scalable with --scale: no fixed name, no published host port
        assert "container_name" not in service and "ports" not in service
        env = service["environment"]
        assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp")
        assert "/tmp" in service["tmpfs"]
        assert int(env["MEMORA_WORKER_METRICS_PORT"]) == Settings().worker_metrics_port
        assert service["healthcheck"]["test"] == ["CMD", "memora", "worker-ready"]
    assert set(consumed) == set(all_queues())


def test_http_services_commands_ports_and_health() -> None:
    for name, factory, port in (
        ("api", "services.api.app:create_app", 8080),
        ("query", "services.api.query_app:create_app", 8081),
    ):
        service = services()[name]
        command = _command(service)
        assert command[:3] == ["uvicorn", factory, "--factory"]
        assert f"--port={port}" in command
        module, attribute = factory.split(":")
        assert callable(getattr(importlib.import_module(module), attribute))
        assert f"{port}:{port}" in service["ports"]
        assert f"{port}/health/ready" in " ".join(service["healthcheck"]["test"])
    beat = _command(services()["beat"])
    assert beat[:4] == ["celery", "-A", "services.workers.tasks", "beat"]
    assert "deploy" not in services()["beat"]  # one beat, never scaled
    flower = services()["flower"]
    assert _command(flower)[:4] == ["celery", "-A", "services.workers.tasks", "flower"]
    assert "FLOWER_BASIC_AUTH" in flower["environment"] or (
        flower["environment"].get("FLOWER_UNAUTHENTICATED_API") == "true"
    )
    assert "5555:5555" in flower["ports"]


def test_memora_environment_names_are_settings() -> None:
    fields = {f"MEMORA_{name.upper()}" for name in Settings.model_fields}
    for name, service in services().items():
        env = service.get("environment", {})
        for key in env:
            if key.startswith("MEMORA_"):
                assert key in fields, f"{name}: {key} is not a setting"


def test_volumes_and_referenced_files_exist() -> None:
    declared = set(compose().get("volumes", {}))
    used = set()
    for name, service in services().items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                used.add(source)
        build = service.get("build")
        if build:
            assert (ROOT / build["context"] / build.get("dockerfile", "Dockerfile")).exists()
    assert used == declared


def test_dockerfile_copies_what_exists_and_installs_cpu_torch_first() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for line in text.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
    assert text.index("torch==") < text.index("pip install .")
    assert "HF_HUB_OFFLINE=1" in text and "USER 10001" in text


def test_prometheus_scrapes_every_service_with_metrics() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = {
        t for job in jobs.values() for s in job.get("static_configs", []) for t in s["targets"]
    }
    assert {"api:8080", "query:8081"} <= targets
    (dns,) = jobs["memora-workers"]["dns_sd_configs"]
    assert set(dns["names"]) == WORKERS and dns["port"] == Settings().worker_metrics_port
    for target in targets:
        assert target.split(":")[0] in services()
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    mounts = " ".join(services()["prometheus"]["volumes"])
    assert "alerts.yml:/etc/prometheus/alerts.yml" in mounts


def _dashboards() -> dict[str, dict[str, Any]]:
    return {
        p.name: json.loads(p.read_text()) for p in sorted((GRAFANA / "dashboards").glob("*.json"))
    }


def test_grafana_provisioning_points_at_the_mounted_dashboards() -> None:
    mounts = dict(v.split(":")[:2] for v in services()["grafana"]["volumes"] if v.startswith("."))
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "memora.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert mounts["./deploy/grafana/dashboards"] == path
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    sources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    (source,) = sources["datasources"]
    assert source["url"] == "http://prometheus:9090"
    for dashboard in _dashboards().values():
        for panel in dashboard["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == source["uid"]


def test_dashboards_are_generated_valid_and_query_defined_metrics() -> None:
    dashboards = _dashboards()
    assert set(dashboards) == {"memora-pipeline.json", "memora-search.json", "memora-llm.json"}
    generator = runpy.run_path(str(GRAFANA / "build_dashboards.py"))
    for name in dashboards:
        assert (GRAFANA / "dashboards" / name).read_text() == generator["render"](name), (
            "stale dashboard: run python deploy/grafana/build_dashboards.py"
        )
    defined = metrics.metric_names()
    exprs: list[str] = []
    for dashboard in dashboards.values():
        assert dashboard["uid"] and dashboard["title"].startswith("Memora")
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                exprs.append(target["expr"])
                used = set(METRIC.findall(target["expr"]))
                assert used and used <= defined, (panel["title"], used - defined)
    joined = "\n".join(exprs)
    # the topics operators asked for
    for needed in (
        "memora_task_successes_total",  # pipeline throughput
        "memora_ingest_lag_seconds_bucket",  # lag
        "memora_task_failures_total",  # failures
        'route="/api/search"',  # search latency
        "memora_llm_tokens_total",  # LLM usage
        "memora_queue_depth",
        "memora_db_pool_connections",
        "memora_embedding_texts_total",
    ):
        assert needed in joined, needed


def _interpolated(value: str) -> str:
    """Compose's `${NAME:-default}` with NAME unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_api_and_query_require_keys_and_limit_rates_in_redis() -> None:
    for name in ("api", "query"):
        env = services()[name]["environment"]
        assert env["MEMORA_ADMIN_KEY"] == "${MEMORA_ADMIN_KEY:-}"  # from .env, never in the file
        values = {
            k.removeprefix("MEMORA_").lower(): _interpolated(str(v))
            for k, v in env.items()
            if k.startswith("MEMORA_")
        }
        settings = Settings(**values)
        assert settings.auth_required is True, name
        assert settings.rate_limit and settings.rate_limit_storage_url is None, name
        assert services()["redis"]["image"] and settings.broker_url == "redis://redis:6379/0"
    for name in WORKERS:  # workers serve no requests: no keys in their environment
        assert "MEMORA_ADMIN_KEY" not in services()[name]["environment"], name
