"""deploy/k8s as a security reviewer and an SRE read it: secrets made outside the manifests and
refused as placeholders, one migration Job per release with pods that wait for their schema,
no replica counts fighting the autoscalers, restricted pods, NetworkPolicies that allow
exactly the flows Memora needs, TLS on the Ingress, the GPU query pods scaled on their load,
and everything scraped and routed to Alertmanager."""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from memora.basics import metrics
from memora.basics.config import Settings
from tests.deploy.kustomize_lite import build
from tests.deploy.test_k8s import (
    K8S,
    OVERLAYS,
    Resource,
    _by_kind,
    _kubectl_kustomize,
    _pod_spec,
    _selects,
    rendered,
    secret_data,
)

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")
SCHEMA_USERS = {"api", "query", "beat"}  # and every worker-*


def _workloads(overlay: str) -> list[Resource]:
    return [r for r in rendered(overlay) if r["kind"] in WORKLOAD_KINDS]


def _tag(image: str) -> str:
    return image.rsplit("/", 1)[-1].split(":", 1)[1]


# ------------------------------------------------------------------------------- secrets
def test_production_creates_no_secret_and_refuses_the_example_placeholders() -> None:
    resources = rendered("production")
    assert not _by_kind(resources, "Secret")  # re-applying never overwrites the real one
    config = _by_kind(resources, "ConfigMap")["memora-config"]["data"]
    assert config["MEMORA_ENVIRONMENT"] == "production"
    env = {**config, **secret_data("production")}
    values = {
        k.removeprefix("MEMORA_").lower(): v
        for k, v in env.items()
        if k.startswith("MEMORA_") and k != "MEMORA_REDIS_ADDRESS"
    }
    with pytest.raises(ValidationError, match="placeholder secrets in production") as refused:
        Settings(**values)
    for name in ("MEMORA_DATABASE_URL", "MEMORA_LLM_API_KEY", "MEMORA_ADMIN_KEY"):
        assert name in str(refused.value)
    real = {k: v.replace("change-me", "Zk2-long-random") for k, v in values.items()}
    assert Settings(**real).environment == "production"
    # every key the pods read from the Secret is in the example an operator fills in
    for workload in _workloads("production"):
        for c in _pod_spec(workload)["containers"] + _pod_spec(workload).get("initContainers", []):
            for env_var in c.get("env", []):
                ref = env_var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secret_data("production"), ref


def test_dev_secret_starts_in_development_only() -> None:
    config = _by_kind(rendered("dev"), "ConfigMap")["memora-config"]["data"]
    assert config.get("MEMORA_ENVIRONMENT", "development") == "development"


# ---------------------------------------------------------------------------- migrations
def _render_copy(tmp_path: Path, overlay: str, tag: str) -> list[Resource]:
    tree = tmp_path / "k8s"
    shutil.copytree(K8S, tree)
    kustomization = tree / "overlays" / overlay / "kustomization.yaml"
    spec = yaml.safe_load(kustomization.read_text())
    for image in spec["images"]:
        image["newTag"] = tag
    kustomization.write_text(yaml.safe_dump(spec))
    return _kubectl_kustomize(tree / "overlays" / overlay) or build(tree / "overlays" / overlay)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_migration_job_per_image_tag(overlay: str, tmp_path: Path) -> None:
    (job,) = _by_kind(rendered(overlay), "Job").values()
    (container,) = _pod_spec(job)["containers"]
    assert job["metadata"]["name"] == f"memora-migrate-{_tag(container['image'])}"
    assert job["spec"]["ttlSecondsAfterFinished"] > 0  # finished Jobs go by themselves
    (next_release,) = [r for r in _render_copy(tmp_path, overlay, "9.9.9") if r["kind"] == "Job"]
    assert next_release["metadata"]["name"] == "memora-migrate-9.9.9"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_app_pods_wait_for_their_schema(overlay: str) -> None:
    waiting = set()
    for workload in _workloads(overlay):
        name = workload["metadata"]["name"]
        spec = _pod_spec(workload)
        if name not in SCHEMA_USERS and not name.startswith("worker-"):
            continue
        (init,) = spec["initContainers"]
        (main,) = spec["containers"]
        assert init["command"][:3] == ["memora", "db", "wait"], name
        assert init["image"] == main["image"], name  # this release's code and head
        assert init["envFrom"] == main["envFrom"], name
        waiting.add(name)
    assert waiting >= SCHEMA_USERS and len(waiting) >= len(SCHEMA_USERS) + 5


# ----------------------------------------------------------------------------- replicas
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_fixed_replicas_under_an_autoscaler(overlay: str) -> None:
    resources = rendered(overlay)
    scaled = {
        h["spec"]["scaleTargetRef"]["name"]
        for h in _by_kind(resources, "HorizontalPodAutoscaler").values()
    }
    scaled |= {
        s["spec"]["scaleTargetRef"]["name"] for s in _by_kind(resources, "ScaledObject").values()
    }
    deployments = _by_kind(resources, "Deployment")
    assert {"api", "query"} | {n for n in deployments if n.startswith("worker-")} <= scaled
    for name, deployment in deployments.items():
        if name in scaled:
            assert "replicas" not in deployment["spec"], name
        else:
            assert deployment["spec"]["replicas"] == 1, name  # beat, flower
    hpas = [n for n in _by_kind(resources, "HorizontalPodAutoscaler")]
    assert len(hpas) == len(set(hpas))
    both = set(hpas) & set(_by_kind(resources, "ScaledObject"))
    assert not both, f"an HPA and a ScaledObject both scale {both}"


# ----------------------------------------------------------------------------- security
RESTRICTED_VOLUMES = {"emptyDir", "persistentVolumeClaim", "configMap", "secret", "projected"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_runs_restricted(overlay: str) -> None:
    for workload in _workloads(overlay):
        name = workload["metadata"]["name"]
        spec = _pod_spec(workload)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(flag), name
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for volume in volumes.values():
            assert set(volume) - {"name"} <= RESTRICTED_VOLUMES, (name, volume)
        claims = {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["capabilities"] == {"drop": ["ALL"]}, (name, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert not sc.get("privileged") and sc.get("runAsUser", 1) > 0, (name, c["name"])
            for mount in c.get("volumeMounts", []):
                assert mount["name"] in volumes or mount["name"] in claims, (name, mount)
            if c["image"].split("/")[-1].startswith("memora") and c in spec["containers"]:
                tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
                assert tmp and "emptyDir" in volumes[tmp[0]["name"]], (name, "writable /tmp")
    config = _by_kind(rendered(overlay), "ConfigMap")["memora-config"]["data"]
    assert config["MEMORA_DATA_DIR"].startswith("/tmp/")  # the root filesystem is read-only


# ------------------------------------------------------------------------ network policy
class Pod:
    def __init__(self, labels: dict[str, str], namespace: str) -> None:
        self.labels, self.namespace = labels, namespace


def _peer_matches(peer: dict[str, Any], pod: Pod, policy_namespace: str) -> bool:
    if "ipBlock" in peer:
        return False
    namespace_selector = peer.get("namespaceSelector")
    if namespace_selector is None:
        if pod.namespace != policy_namespace:
            return False
    elif not _selects(namespace_selector, {"kubernetes.io/metadata.name": pod.namespace}):
        return False
    return _selects(peer.get("podSelector", {}), pod.labels)


def _port_matches(rule: dict[str, Any], port: int) -> bool:
    return "ports" not in rule or any(p["port"] == port for p in rule["ports"])


def _allowed(policies: list[Resource], direction: str, pod: Pod, peer: Pod, port: int) -> bool:
    """Kubernetes' semantics: a pod selected by no policy of this direction is open; one that is
    selected accepts what at least one of those policies' rules allows."""
    key, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    applying = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and direction in p["spec"]["policyTypes"]
        and _selects(p["spec"]["podSelector"], pod.labels)
    ]
    if not applying:
        return True
    return any(
        _port_matches(rule, port)
        and any(_peer_matches(x, peer, p["metadata"]["namespace"]) for x in rule.get(peers, []))
        for p in applying
        for rule in p["spec"].get(key, [])
    )


def _flow(policies: list[Resource], source: Pod, target: Pod, port: int) -> bool:
    return _allowed(policies, "Egress", source, target, port) and _allowed(
        policies, "Ingress", target, source, port
    )


def _egress_to_internet(policies: list[Resource], source: Pod, port: int) -> bool:
    address = ipaddress.ip_address("203.0.113.10")
    for policy in policies:
        if not _selects(policy["spec"]["podSelector"], source.labels):
            continue
        for rule in policy["spec"].get("egress", []):
            for peer in rule.get("to", []):
                block = peer.get("ipBlock")
                if block and address in ipaddress.ip_network(block["cidr"]):
                    excepted = any(address in ipaddress.ip_network(e) for e in block["except"])
                    if not excepted and _port_matches(rule, port):
                        return True
    return False


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_deny_by_default_and_allow_the_needed_flows(overlay: str) -> None:
    resources = rendered(overlay)
    policies = list(_by_kind(resources, "NetworkPolicy").values())
    (namespace,) = _by_kind(resources, "Namespace")
    deny = _by_kind(resources, "NetworkPolicy")["default-deny"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
    pods = {
        w["metadata"]["name"]: Pod(w["spec"]["template"]["metadata"]["labels"], namespace)
        for w in _workloads(overlay)
    }
    outside = {name: Pod({}, name) for name in ("ingress-nginx", "monitoring", "keda", "elsewhere")}
    dns = Pod({"k8s-app": "kube-dns"}, "kube-system")
    (job,) = _by_kind(resources, "Job")
    needed = [
        ("api", "postgres", 5432),
        ("api", "redis", 6379),
        ("api", "query", 8081),
        ("query", "postgres", 5432),
        ("query", "redis", 6379),
        ("worker-embed", "postgres", 5432),
        ("worker-opinions", "redis", 6379),
        ("beat", "redis", 6379),
        ("beat", "postgres", 5432),
        ("flower", "redis", 6379),
        (job, "postgres", 5432),
    ]
    for source, target, port in needed:
        assert _flow(policies, pods[source], pods[target], port), (source, target, port)
    for name, pod in pods.items():
        assert _allowed(policies, "Egress", pod, dns, 53), f"{name} cannot resolve names"
    for source, target, port in [
        ("ingress-nginx", "api", 8080),
        ("keda", "redis", 6379),
        ("monitoring", "api", 8080),
        ("monitoring", "query", 8081),
        ("monitoring", "worker-extract", 9540),
        ("monitoring", "flower", 5555),
        ("monitoring", "redis", 9121),
        ("monitoring", "postgres", 9187),
    ]:
        assert _flow(policies, outside[source], pods[target], port), (source, target, port)
    for source, target, port in [
        ("elsewhere", "api", 8080),
        ("elsewhere", "postgres", 5432),
        ("ingress-nginx", "postgres", 5432),
        ("ingress-nginx", "flower", 5555),
    ]:
        assert not _flow(policies, outside[source], pods[target], port), (source, target)
    for source, target, port in [
        ("flower", "postgres", 5432),
        ("worker-extract", "query", 8081),
        ("api", "worker-embed", 9540),
        ("redis", "postgres", 5432),
    ]:
        assert not _flow(policies, pods[source], pods[target], port), (source, target)
    # the LLM endpoint, outside the cluster
    for name in ("api", "query", "worker-extract", "worker-opinions"):
        assert _egress_to_internet(policies, pods[name], 443), name
    assert not _egress_to_internet(policies, pods["postgres"], 443)


# ------------------------------------------------------------------------------- ingress
def test_production_ingress_serves_the_api_over_tls() -> None:
    resources = rendered("production")
    (ingress,) = _by_kind(resources, "Ingress").values()
    tls_hosts = {h for t in ingress["spec"]["tls"] for h in t["hosts"]}
    assert all(t["secretName"] for t in ingress["spec"]["tls"])
    services = _by_kind(resources, "Service")
    for rule in ingress["spec"]["rules"]:
        assert rule["host"] in tls_hosts
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            ports = {p["name"] for p in services[backend["name"]]["spec"]["ports"]}
            assert backend["port"]["name"] in ports
    body = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"]
    # larger than the API's own limit, so that the API answers oversized bodies with its 413
    assert int(body.removesuffix("m")) * 1024 * 1024 > Settings().max_body_bytes


# ---------------------------------------------------------------------- query scaling
def test_production_scales_the_gpu_query_pods_on_requests_in_flight() -> None:
    resources = rendered("production")
    assert "query" not in _by_kind(resources, "HorizontalPodAutoscaler")
    query = _by_kind(resources, "ScaledObject")["query"]
    assert query["spec"]["scaleTargetRef"]["name"] == "query"
    (trigger,) = query["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["serverAddress"].startswith("http")
    assert float(trigger["metadata"]["threshold"]) <= Settings().search_concurrency
    promql = trigger["metadata"]["query"]
    assert "memora_http_requests_in_progress" in metrics.metric_names()
    assert 'memora_http_requests_in_progress{service="query"' in promql
    (namespace,) = _by_kind(resources, "Namespace")
    assert f'namespace="{namespace}"' in promql
    assert query["spec"]["minReplicaCount"] >= 1 and query["spec"]["fallback"]["replicas"] >= 1
    # scraped, so that Prometheus has the series
    monitors = _by_kind(resources, "ServiceMonitor").values()
    labels = _by_kind(resources, "Service")["query"]["metadata"]["labels"]
    assert any(_selects(m["spec"]["selector"], labels) for m in monitors)


# ---------------------------------------------------------------------------- monitoring
def test_flower_and_exporters_are_scraped_and_alerts_are_routed() -> None:
    resources = rendered("production")
    monitors = list(_by_kind(resources, "ServiceMonitor").values())
    services = _by_kind(resources, "Service")
    for service, port in (("flower", "http"), ("redis", "metrics"), ("postgres", "metrics")):
        labels = services[service]["metadata"]["labels"]
        selecting = [m for m in monitors if _selects(m["spec"]["selector"], labels)]
        assert selecting, service
        assert any(e["port"] == port for m in selecting for e in m["spec"]["endpoints"])
    exporters = {
        c["name"]
        for s in _by_kind(resources, "StatefulSet").values()
        for c in _pod_spec(s)["containers"]
    }
    assert {"redis-exporter", "postgres-exporter"} <= exporters
    (config,) = _by_kind(resources, "AlertmanagerConfig").values()
    receivers = {r["name"] for r in config["spec"]["receivers"]}

    def routes(route: dict[str, Any]) -> list[dict[str, Any]]:
        return [route, *(r for child in route.get("routes", []) for r in routes(child))]

    assert all(r["receiver"] in receivers for r in routes(config["spec"]["route"]))
    for receiver in config["spec"]["receivers"]:
        for hook in receiver.get("webhookConfigs", []):
            assert "url" not in hook and hook["urlSecret"]["name"]  # no secret in manifests
    (rule,) = _by_kind(resources, "PrometheusRule").values()
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert (
        "memora_beat_last_heartbeat_timestamp_seconds" in alerts["MemoraBeatHeartbeatStale"]["expr"]
    )
    assert "redis_up" in alerts["MemoraRedisDown"]["expr"]
    assert "pg_up" in alerts["MemoraPostgresDown"]["expr"]
