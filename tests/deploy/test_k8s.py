"""deploy/k8s, validated offline: every overlay rendered (kubectl's kustomize when installed,
else tests/deploy/kustomize_lite.py, which must then agree with it), every built-in resource
checked against the Kubernetes schemas (kubernetes-validate, strict: unknown fields fail),
custom resources against structural schemas, and the wiring between them checked."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.stages import Stage, all_queues, queue_for
from tests.deploy.crd_schemas import CRD_SCHEMAS
from tests.deploy.kustomize_lite import build

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "production")
KUBERNETES_VERSION = "1.30.0"
KUBECTL = shutil.which("kubectl")
Resource = dict[str, Any]


def _kubectl_kustomize(directory: Path) -> list[Resource] | None:
    if KUBECTL is None:
        return None
    out = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    if out.returncode != 0:
        if "unknown command" in out.stderr:
            return None
        raise AssertionError(out.stderr)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@cache
def rendered(overlay: str) -> tuple[Resource, ...]:
    directory = K8S / "overlays" / overlay
    return tuple(_kubectl_kustomize(directory) or build(directory))


def secret_data(overlay: str) -> dict[str, str]:
    """memora-secrets as the pods see it: the dev overlay's Secret, or for production (which
    reads one made outside the manifests) the keys of its example env file."""
    secrets = _by_kind(rendered(overlay), "Secret")
    if "memora-secrets" in secrets:
        return dict(secrets["memora-secrets"]["stringData"])
    lines = (K8S / "overlays" / overlay / "secrets.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _key(r: Resource) -> tuple[str, str, str, str]:
    meta = r["metadata"]
    return (r["apiVersion"], r["kind"], meta.get("namespace", ""), meta["name"])


def _by_kind(resources: tuple[Resource, ...], kind: str) -> dict[str, Resource]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def _pod_spec(r: Resource) -> dict[str, Any]:
    return r["spec"]["template"]["spec"]


def _containers(resources: tuple[Resource, ...]) -> list[dict[str, Any]]:
    return [
        c
        for r in resources
        if r["kind"] in ("Deployment", "StatefulSet", "Job")
        for c in _pod_spec(r)["containers"]
    ]


@pytest.mark.parametrize("directory", ["base", "overlays/dev", "overlays/production"])
def test_lite_renderer_agrees_with_kustomize(directory: str) -> None:
    theirs = _kubectl_kustomize(K8S / directory)
    if theirs is None:
        pytest.skip("kubectl with kustomize is not installed")
    mine = build(K8S / directory)
    assert {_key(r): r for r in mine} == {_key(r): r for r in theirs}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_resources_validate_against_kubernetes_and_crd_schemas(overlay: str) -> None:
    builtin = 0
    for r in rendered(overlay):
        schema = CRD_SCHEMAS.get((r["apiVersion"], r["kind"]))
        if schema is not None:
            jsonschema.validate(r, schema)
            continue
        kubernetes_validate.validate(r, KUBERNETES_VERSION, strict=True)
        builtin += 1
    assert builtin >= 25


def test_validation_catches_mistakes() -> None:
    deployment = dict(_by_kind(rendered("dev"), "Deployment")["api"])
    broken = {**deployment, "spec": {**deployment["spec"], "replicass": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    scaled = dict(_by_kind(rendered("production"), "ScaledObject")["worker-embed"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**scaled, "spec": {**scaled["spec"], "maxReplicas": 3}},
            CRD_SCHEMAS[("keda.sh/v1alpha1", "ScaledObject")],
        )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_lives_in_the_overlay_namespace(overlay: str) -> None:
    resources = rendered(overlay)
    (namespace,) = _by_kind(resources, "Namespace")
    assert namespace == ("memora-dev" if overlay == "dev" else "memora")
    for r in resources:
        if r["kind"] != "Namespace":
            assert r["metadata"]["namespace"] == namespace, _key(r)
    config = _by_kind(resources, "ConfigMap")["memora-config"]["data"]
    assert f".{namespace}.svc" in config["MEMORA_REDIS_ADDRESS"]


def _consumed_queues(command: list[str]) -> set[str]:
    if "--stage" in command:
        stage = Stage(command[command.index("--stage") + 1])
        return {queue_for(stage), queue_for(stage, backfill=True)}
    return set(command[command.index("--queues") + 1].split(","))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_worker_deployment_per_queue_with_probes_and_metrics(overlay: str) -> None:
    resources = rendered(overlay)
    workers = {
        name: d
        for name, d in _by_kind(resources, "Deployment").items()
        if name.startswith("worker-")
    }
    consumed: dict[str, str] = {}
    for name, d in workers.items():
        (container,) = _pod_spec(d)["containers"]
        assert container["command"][:2] == ["memora", "worker"]
        for queue in _consumed_queues(container["command"]):
            assert queue not in consumed, f"{queue} consumed by {consumed.get(queue)} and {name}"
            consumed[queue] = name
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["exec"]["command"][:2] == ["memora", "worker-ready"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp"}
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == Settings().worker_metrics_port
    assert set(consumed) == set(all_queues())
    pdbs = _by_kind(resources, "PodDisruptionBudget")
    assert all(name in pdbs for name in workers)


def test_production_scales_workers_on_queue_length_with_keda() -> None:
    resources = rendered("production")
    deployments = _by_kind(resources, "Deployment")
    scaled = _by_kind(resources, "ScaledObject")
    workers = {n for n in deployments if n.startswith("worker-")}
    assert set(scaled) - {"query"} == workers
    for name, so in scaled.items():
        if name == "query":
            continue  # tests/deploy/test_k8s_hardening.py
        assert so["spec"]["scaleTargetRef"]["name"] == name
        (container,) = _pod_spec(deployments[name])["containers"]
        lists = set()
        for trigger in so["spec"]["triggers"]:
            assert trigger["type"] == "redis"
            assert trigger["metadata"]["addressFromEnv"] == "MEMORA_REDIS_ADDRESS"
            assert int(trigger["metadata"]["listLength"]) > 0
            lists.add(trigger["metadata"]["listName"])
        assert lists <= _consumed_queues(container["command"]) and lists
        assert so["spec"]["fallback"]["replicas"] >= 1
    assert not {n for n in _by_kind(resources, "HorizontalPodAutoscaler") if n.startswith("worker")}


def test_dev_falls_back_to_cpu_hpas_for_workers() -> None:
    resources = rendered("dev")
    assert not _by_kind(resources, "ScaledObject")
    hpas = _by_kind(resources, "HorizontalPodAutoscaler")
    workers = {n for n in _by_kind(resources, "Deployment") if n.startswith("worker-")}
    assert workers <= set(hpas)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_references_between_resources_resolve(overlay: str) -> None:
    resources = rendered(overlay)
    names = {(r["kind"], r["metadata"]["name"]) for r in resources}
    workloads = [r for r in resources if r["kind"] in ("Deployment", "StatefulSet", "Job")]
    pod_labels = [r["spec"]["template"]["metadata"]["labels"] for r in workloads]
    for r in resources:
        kind, spec = r["kind"], r.get("spec", {})
        if kind == "HorizontalPodAutoscaler":
            target = spec["scaleTargetRef"]
            assert (target["kind"], target["name"]) in names
        if kind in ("Service", "PodDisruptionBudget"):
            selector = spec["selector"] if kind == "Service" else spec["selector"]["matchLabels"]
            assert any(selector.items() <= labels.items() for labels in pod_labels), _key(r)
        if kind == "Service":
            pods = [
                w
                for w in workloads
                if spec["selector"].items() <= w["spec"]["template"]["metadata"]["labels"].items()
            ]
            port_names = {
                p.get("name")
                for w in pods
                for c in _pod_spec(w)["containers"]
                for p in c.get("ports", [])
            }
            for port in spec["ports"]:
                assert port["targetPort"] in port_names, _key(r)
    for container in _containers(resources):
        for source in container.get("envFrom", []):
            ref = source.get("configMapRef") or source.get("secretRef")
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            # production reads memora-secrets made outside the manifests
            assert (kind, ref["name"]) in names or (
                overlay == "production" and ref["name"] == "memora-secrets"
            )
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["name"] == "memora-secrets"
                assert ref["key"] in secret_data(overlay)
    for monitor in _by_kind(resources, "ServiceMonitor").values():
        services = [
            s
            for s in _by_kind(resources, "Service").values()
            if _selects(monitor["spec"]["selector"], s["metadata"].get("labels", {}))
        ]
        assert services, monitor["metadata"]["name"]
        for endpoint in monitor["spec"]["endpoints"]:
            assert all(
                endpoint["port"] in {p["name"] for p in s["spec"]["ports"]} for s in services
            )


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        if expr["operator"] == "In" and labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_settings_and_images(overlay: str) -> None:
    resources = rendered(overlay)
    fields = {f"MEMORA_{name.upper()}" for name in Settings.model_fields}
    data = {**_by_kind(resources, "ConfigMap")["memora-config"]["data"]}
    data.update(secret_data(overlay))
    unknown = {k for k in data if k.startswith("MEMORA_") and k not in fields}
    assert unknown == {"MEMORA_REDIS_ADDRESS"}  # KEDA's, not Memora's
    for container in _containers(resources):
        image = container["image"]
        assert ":" in image.rsplit("/", 1)[-1], f"untagged image {image}"
        assert container["resources"]["requests"], container["name"]


def test_services_probes_gpu_and_single_beat() -> None:
    for overlay in OVERLAYS:
        resources = rendered(overlay)
        deployments = _by_kind(resources, "Deployment")
        for name, port in (("api", 8080), ("query", 8081)):
            (c,) = _pod_spec(deployments[name])["containers"]
            assert c["readinessProbe"]["httpGet"]["path"] == "/health/ready"
            assert c["livenessProbe"]["httpGet"]["path"] == "/health/live"
            assert c["ports"][0]["containerPort"] == port
            autoscalers = _by_kind(resources, "HorizontalPodAutoscaler")
            assert name in autoscalers or name in _by_kind(resources, "ScaledObject")
            assert name in _by_kind(resources, "PodDisruptionBudget")
            assert name in _by_kind(resources, "Service")
        beat = deployments["beat"]
        assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
        (job,) = _by_kind(resources, "Job").values()
        assert _pod_spec(job)["containers"][0]["command"] == ["memora", "migrate"]
        postgres = _by_kind(resources, "StatefulSet")["postgres"]
        assert postgres["spec"]["volumeClaimTemplates"]
        assert "flower" in _by_kind(resources, "Service")
        query = _pod_spec(deployments["query"])
        gpu = query["containers"][0]["resources"]["limits"].get("nvidia.com/gpu")
        if overlay == "production":
            assert gpu == 1
            assert query["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
            assert query["tolerations"][0]["key"] == "nvidia.com/gpu"
        else:
            assert gpu is None and "nodeSelector" not in query and "tolerations" not in query


def test_alerts_match_prometheus_rule_and_use_defined_metrics() -> None:
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    (rule,) = _by_kind(rendered("production"), "PrometheusRule").values()
    assert rule["spec"] == alerts
    defined = metrics.metric_names()
    for group in alerts["groups"]:
        for r in group["rules"]:
            used = set(re.findall(r"\bmemora_[a-z0-9_]+", r["expr"]))
            assert used <= defined, used - defined


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_api_and_query_require_keys_and_limit_rates_in_redis(overlay: str) -> None:
    resources = rendered(overlay)
    env = {**_by_kind(resources, "ConfigMap")["memora-config"]["data"]}
    env.update(secret_data(overlay))
    if overlay == "production":  # the example's placeholders, replaced as an operator would
        env = {k: v.replace("change-me", "S3cret-value") for k, v in env.items()}
    values = {
        k.removeprefix("MEMORA_").lower(): v
        for k, v in env.items()
        if k.startswith("MEMORA_") and k != "MEMORA_REDIS_ADDRESS"
    }
    settings = Settings(**values)  # validates the limits and the admin key placeholder
    assert settings.auth_required is True
    assert settings.rate_limit and (settings.broker_url or "").startswith("redis://")
    assert settings.rate_limit_storage_url is None  # the counters live in the broker's Redis
    deployments = _by_kind(resources, "Deployment")
    for name in ("api", "query"):
        sources = [s for c in _pod_spec(deployments[name])["containers"] for s in c["envFrom"]]
        names = {(s.get("configMapRef") or s.get("secretRef"))["name"] for s in sources}
        assert {"memora-config", "memora-secrets"} <= names, name


def _ingress_backend(ingress: Resource, path: str) -> str:
    """The Service an Ingress sends `path` to (the longest matching Prefix or Exact path)."""
    found: list[tuple[int, str]] = []
    for rule in ingress["spec"]["rules"]:
        for p in rule["http"]["paths"]:
            prefix = p["path"].rstrip("/")
            exact = p["pathType"] == "Exact" and path == p["path"]
            if exact or (p["pathType"] == "Prefix" and (path + "/").startswith(prefix + "/")):
                found.append((len(p["path"]), p["backend"]["service"]["name"]))
    assert found, f"no backend for {path}"
    return max(found)[1]


def test_ingress_sends_each_path_to_its_one_owner() -> None:
    """The search and think paths go straight to the query Service (no hop through the write
    API); the write API owns the memory's view and forwards the lifecycle's model routes to
    the query Service itself (tests/unit/test_route_owners.py checks the two apps' routing)."""
    from services.api.proxy import READ_PATHS

    resources = rendered("production")
    (ingress,) = _by_kind(resources, "Ingress").values()
    for name in READ_PATHS:
        assert _ingress_backend(ingress, f"/api/{name}") == "query", name
    memory = "/api/agents/alice/memories/6f1c1b0e-5a0e-4a43-9f39-1d0c2f1f6d11"
    for path in (memory, f"{memory}/restore", "/api/agents/alice/recall", "/api/graph", "/"):
        assert _ingress_backend(ingress, path) == "api", path
    assert _ingress_backend(ingress, "/api/search/x") == "api"  # Exact: nothing below them
    query_url = _by_kind(resources, "ConfigMap")["memora-config"]["data"]["MEMORA_QUERY_URL"]
    assert query_url == "http://query:8081" and "query" in _by_kind(resources, "Service")
