"""docker-compose.yml, the Dockerfile and the Prometheus/Grafana files, validated offline (no
Docker engine here): services, dependencies, commands, ports, volumes, referenced files, and
dashboards that query only metrics the code defines."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import runpy
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.stages import MAINTENANCE_STAGES, Stage, all_queues, queue_for

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
METRIC = re.compile(r"\bmemora_[a-z0-9_]+")
SERIES = re.compile(r"\b(?:flower|redis|pg)_[a-z0-9_]+")
WORKERS = {f"worker-{s.value}" for s in Stage if s not in MAINTENANCE_STAGES} | {"worker-webhooks"}


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
    expected |= {"prometheus", "alertmanager", "grafana", "redis-exporter", "postgres-exporter"}
    expected |= WORKERS
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
    assert text.index("torch==") < text.index("pip install --no-deps .")
    assert "HF_HUB_OFFLINE=1" in text and "USER 10001" in text


def test_dockerfile_variants_and_the_gpu_override() -> None:
    """`TORCH_VARIANT` picks a torch stage that exists (CPU by default); the GPU override
    builds that variant for the query service only and reserves an NVIDIA GPU for it."""
    text = (ROOT / "Dockerfile").read_text()
    stages = set(re.findall(r"^FROM \S+ AS (\S+)$", text, re.M))
    (default,) = re.findall(r"^ARG TORCH_VARIANT=(\S+)$", text, re.M)
    assert default == "cpu" and {"torch-cpu", "torch-gpu"} <= stages
    assert re.search(r"^FROM torch-\$\{TORCH_VARIANT\} AS app$", text, re.M)
    # the CPU index's +cpu wheel; PyPI's Linux wheel is the CUDA build
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    assert "ARG TORCH_INDEX_URL=https://pypi.org/simple" in text
    override = yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text())["services"]
    assert set(override) == {"query"}
    query = override["query"]
    assert query["build"]["args"]["TORCH_VARIANT"] == "gpu"
    assert "torch-" + query["build"]["args"]["TORCH_VARIANT"] in stages
    assert query["image"] != services()["query"]["image"]  # not the CPU image's tag
    (device,) = query["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert device["count"] == 1


def _lock() -> dict[str, str]:
    """requirements.lock: name -> pinned version."""
    pins = re.findall(
        r"^([a-z0-9][a-z0-9._-]*)==(\S+)", (ROOT / "requirements.lock").read_text(), re.M
    )
    return {canonicalize_name(name): version for name, version in pins}


def test_lock_pins_every_dependency_with_hashes_and_cpu_torch() -> None:
    lock = _lock()
    entries = re.split(r"^(?=[a-z0-9])", (ROOT / "requirements.lock").read_text(), flags=re.M)
    pinned = [e for e in entries if "==" in e.split("\n", 1)[0]]
    assert len(pinned) == len(lock) > 100
    assert all("--hash=sha256:" in e for e in pinned), "every pin carries its hashes"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{name} is not locked: run `make lock`"
        assert Version(lock[name]) in requirement.specifier, (name, lock[name], spec)
        for extra in requirement.extras:  # celery[redis], psycopg[binary,pool], ...
            for dep in map(Requirement, importlib.metadata.requires(name) or []):
                marker = dep.marker
                if marker and marker.evaluate({"extra": extra}) and not marker.evaluate():
                    assert canonicalize_name(dep.name) in lock, (spec, dep)
    assert lock["torch"] == "2.13.0+cpu"
    assert "memora" not in lock  # installed from the tree, --no-deps


def test_image_and_make_install_the_lock() -> None:
    lock = _lock()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY requirements.lock" in dockerfile
    assert "--require-hashes --no-deps -r" in dockerfile
    (torch_version,) = re.findall(r"ARG TORCH_VERSION=(\S+)", dockerfile)
    assert lock["torch"].split("+")[0] == torch_version  # the GPU image: same version, CUDA
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements.lock" in makefile and "--no-deps -e ." in makefile
    assert re.search(r"^\$\(STAMP\): .*requirements\.lock", makefile, re.M)
    assert re.search(r"^lock:", makefile, re.M)
    assert re.search(r"uv pip compile .*pyproject\.toml", makefile)
    assert "make test" in (ROOT / ".ci" / "run").read_text().splitlines()  # CI installs the lock


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
    assert {"flower:5555", "redis-exporter:9121", "postgres-exporter:9187"} <= targets
    assert jobs["memora-flower"]["metrics_path"] == "/metrics"
    assert {"redis", "postgres"} <= set(jobs)  # job names as in deploy/k8s (alerts, dashboards)
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    mounts = " ".join(services()["prometheus"]["volumes"])
    assert "alerts.yml:/etc/prometheus/alerts.yml" in mounts
    exporters = services()["redis-exporter"], services()["postgres-exporter"]
    assert exporters[0]["environment"]["REDIS_ADDR"] == "redis://redis:6379"
    assert exporters[1]["environment"]["DATA_SOURCE_URI"].startswith("postgres:5432/memora")


def test_prometheus_sends_alerts_to_alertmanager() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    (manager,) = config["alerting"]["alertmanagers"]
    (target,) = manager["static_configs"][0]["targets"]
    host, port = target.split(":")
    service = services()[host]
    assert service["image"].startswith("prom/alertmanager:")
    assert f"{port}:{port}" in service["ports"]
    mounts = dict(v.split(":")[:2] for v in service["volumes"] if v.startswith("."))
    source = mounts["./deploy/alertmanager/alertmanager.yml"]
    assert f"--config.file={source}" in service["command"]
    routing = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text())
    receivers = {r["name"] for r in routing["receivers"]}

    def routes(route: dict[str, Any]) -> list[dict[str, Any]]:
        return [route, *(r for child in route.get("routes", []) for r in routes(child))]

    assert all(r["receiver"] in receivers for r in routes(routing["route"]))
    severities = {
        r["labels"]["severity"]
        for g in yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())[
            "groups"
        ]
        for r in g["rules"]
    }
    routed = {
        m.split("=")[1].strip('"') for r in routes(routing["route"]) for m in r.get("matchers", [])
    }
    assert routed <= severities and "critical" in routed


def test_beat_heartbeat_alert_watches_the_exported_metric() -> None:
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    rules = {r["alert"]: r for g in alerts["groups"] for r in g["rules"]}
    stale = rules["MemoraBeatHeartbeatStale"]
    assert "memora_beat_last_heartbeat_timestamp_seconds" in metrics.metric_names()
    threshold = float(stale["expr"].rsplit(">", 1)[1])
    # several missed heartbeats before it fires, and well under the stuck-operation horizon
    assert 3 * Settings().beat_heartbeat_seconds <= threshold <= Settings().stuck_after_seconds


def test_replica_and_stall_alerts_watch_what_the_services_export() -> None:
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    rules = {r["alert"]: r for g in alerts["groups"] for r in g["rules"]}
    settings = Settings()
    behind = rules["MemoraReadReplicaBehind"]["expr"]
    assert behind.startswith("max(memora_read_replica_lag_seconds) >")
    # it fires for a replica reads have already left (past the query service's own bound)
    assert float(behind.rsplit(">", 1)[1]) >= settings.read_max_lag_seconds
    assert rules["MemoraReadReplicaDown"]["expr"] == "min(memora_read_replica_lag_seconds) < 0"
    stalled = rules["MemoraQueueStalled"]["expr"]
    assert "memora_queue_oldest_age_seconds" in stalled and "memora_tasks_in_progress" in stalled
    waited = float(re.search(r"\) > (\d+)", stalled).group(1))  # type: ignore[union-attr]
    # longer than a held append's longest hold, shorter than the reconciler's horizon
    assert settings.append_coalesce_busy_ms / 1000 < waited < settings.stuck_after_seconds


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
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == source["type"]
        assert variables["datasource"]["current"]["value"] == source["uid"]  # the default
        for name in ("namespace", "instance"):
            assert variables[name]["datasource"]["uid"] == "${datasource}"
            assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
        for panel in dashboard["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == "${datasource}"
                for target in panel["targets"]:
                    assert target["datasource"]["uid"] == "${datasource}"


def test_dashboards_are_generated_valid_and_query_defined_metrics() -> None:
    dashboards = _dashboards()
    assert set(dashboards) == {
        "memora-pipeline.json",
        "memora-search.json",
        "memora-llm.json",
        "memora-infra.json",
    }
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
                external = {m for m in SERIES.findall(target["expr"]) if m not in used}
                assert used or external, panel["title"]
                assert used <= defined, (panel["title"], used - defined)
                assert external <= exporter_metrics(), (panel["title"], external)
                # every series narrowed to the picked namespace and instance
                selectors = re.findall(
                    r"\b(?:memora|flower|redis|pg)_[a-z0-9_]+(\{[^}]*\})?", target["expr"]
                )
                assert all('instance=~"$instance"' in s for s in selectors), target["expr"]
                assert all('namespace=~"$namespace"' in s for s in selectors), target["expr"]
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
        "memora_beat_last_heartbeat_timestamp_seconds",
        "flower_worker_online",
        "redis_up",
        "pg_up",
    ):
        assert needed in joined, needed


# Series of the exporters the dashboards chart: Flower's are read from its installed source;
# redis_exporter's and postgres_exporter's (images pinned in docker-compose.yml and deploy/k8s)
# from their documentation.
REDIS_EXPORTER = {
    "redis_up",
    "redis_memory_used_bytes",
    "redis_memory_max_bytes",
    "redis_connected_clients",
    "redis_commands_processed_total",
    "redis_evicted_keys_total",
}
POSTGRES_EXPORTER = {
    "pg_up",
    "pg_stat_activity_count",
    "pg_stat_database_xact_commit",
    "pg_stat_database_xact_rollback",
    "pg_stat_database_blks_hit",
    "pg_stat_database_blks_read",
    "pg_stat_database_deadlocks",
    "pg_database_size_bytes",
}


@cache
def exporter_metrics() -> set[str]:
    source = Path(importlib.import_module("flower.events").__file__ or "").read_text()
    flower = set(re.findall(r"'(flower_[a-z_]+)'", source))
    flower |= {f"{name}_bucket" for name in flower}
    return flower | REDIS_EXPORTER | POSTGRES_EXPORTER


def test_production_mode_refuses_the_compose_defaults() -> None:
    env = services()["api"]["environment"]
    assert env["MEMORA_ENVIRONMENT"] == "${MEMORA_ENVIRONMENT:-development}"
    values = {
        k.removeprefix("MEMORA_").lower(): _interpolated(str(v))
        for k, v in env.items()
        if k.startswith("MEMORA_")
    }
    values["environment"] = "production"
    with pytest.raises(ValueError, match="MEMORA_DATABASE_URL"):
        Settings(**values)  # POSTGRES_PASSWORD unset: the default password


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
