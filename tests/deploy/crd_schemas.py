"""Structural JSON schemas for the custom resources in deploy/k8s (KEDA ScaledObject,
Prometheus Operator ServiceMonitor, PrometheusRule and AlertmanagerConfig): the fields Memora
uses, typed, with
unknown fields refused, written from the projects' API references. kubernetes-validate has
no schemas for CRDs."""

from __future__ import annotations

from typing import Any

_STR = {"type": "string"}
_INT = {"type": "integer"}
_STR_MAP = {"type": "object", "additionalProperties": _STR}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


_METADATA = _obj(
    {"name": _STR, "namespace": _STR, "labels": _STR_MAP, "annotations": _STR_MAP}, ["name"]
)


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _obj(
        {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
        ["apiVersion", "kind", "metadata", "spec"],
    )


_HPA_BEHAVIOR = {"type": "object"}  # autoscaling/v2 behavior: checked by kubernetes-validate

SCALED_OBJECT = _resource(
    "keda.sh/v1alpha1",
    "ScaledObject",
    _obj(
        {
            "scaleTargetRef": _obj(
                {"name": _STR, "kind": _STR, "apiVersion": _STR, "envSourceContainerName": _STR},
                ["name"],
            ),
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 1},
            "pollingInterval": _INT,
            "cooldownPeriod": _INT,
            "idleReplicaCount": _INT,
            "fallback": _obj(
                {"failureThreshold": _INT, "replicas": _INT}, ["failureThreshold", "replicas"]
            ),
            "advanced": _obj(
                {
                    "restoreToOriginalReplicaCount": {"type": "boolean"},
                    "horizontalPodAutoscalerConfig": _obj(
                        {"name": _STR, "behavior": _HPA_BEHAVIOR}
                    ),
                }
            ),
            "triggers": {
                "type": "array",
                "minItems": 1,
                "items": _obj(
                    {
                        "type": {"enum": ["redis", "cpu", "memory", "prometheus"]},
                        "name": _STR,
                        "metadata": _STR_MAP,
                        "authenticationRef": _obj({"name": _STR, "kind": _STR}, ["name"]),
                        "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                    },
                    ["type", "metadata"],
                ),
            },
        },
        ["scaleTargetRef", "triggers"],
    ),
)

_SELECTOR = _obj(
    {
        "matchLabels": _STR_MAP,
        "matchExpressions": {
            "type": "array",
            "items": _obj(
                {
                    "key": _STR,
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": _STR},
                },
                ["key", "operator"],
            ),
        },
    }
)

_RELABEL = _obj(
    {
        "sourceLabels": {"type": "array", "items": _STR},
        "separator": _STR,
        "targetLabel": _STR,
        "regex": _STR,
        "replacement": _STR,
        "action": _STR,
    }
)

SERVICE_MONITOR = _resource(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    _obj(
        {
            "jobLabel": _STR,
            "selector": _SELECTOR,
            "namespaceSelector": _obj(
                {"any": {"type": "boolean"}, "matchNames": {"type": "array"}}
            ),
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": _obj(
                    {
                        "port": _STR,
                        "path": _STR,
                        "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "scrapeTimeout": _STR,
                        "scheme": {"enum": ["http", "https"]},
                        "relabelings": {"type": "array", "items": _RELABEL},
                        "metricRelabelings": {"type": "array", "items": _RELABEL},
                    },
                    ["port"],
                ),
            },
        },
        ["selector", "endpoints"],
    ),
)

PROMETHEUS_RULE = _resource(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    _obj(
        {
            "groups": {
                "type": "array",
                "items": _obj(
                    {
                        "name": _STR,
                        "interval": _STR,
                        "rules": {
                            "type": "array",
                            "items": _obj(
                                {
                                    "alert": _STR,
                                    "record": _STR,
                                    "expr": _STR,
                                    "for": _STR,
                                    "labels": _STR_MAP,
                                    "annotations": _STR_MAP,
                                },
                                ["expr"],
                            ),
                        },
                    },
                    ["name", "rules"],
                ),
            }
        },
        ["groups"],
    ),
)

_DURATION = {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"}
_MATCHER = _obj(
    {"name": _STR, "value": _STR, "matchType": {"enum": ["=", "!=", "=~", "!~"]}}, ["name"]
)
_SECRET_KEY = _obj({"name": _STR, "key": _STR, "optional": {"type": "boolean"}}, ["name", "key"])


def _am_route(depth: int) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "receiver": _STR,
        "groupBy": {"type": "array", "items": _STR},
        "groupWait": _DURATION,
        "groupInterval": _DURATION,
        "repeatInterval": _DURATION,
        "matchers": {"type": "array", "items": _MATCHER},
        "continue": {"type": "boolean"},
    }
    if depth:
        properties["routes"] = {"type": "array", "items": _am_route(depth - 1)}
    return _obj(properties)


ALERTMANAGER_CONFIG = _resource(
    "monitoring.coreos.com/v1alpha1",
    "AlertmanagerConfig",
    _obj(
        {
            "route": _am_route(2),
            "receivers": {
                "type": "array",
                "minItems": 1,
                "items": _obj(
                    {
                        "name": _STR,
                        "webhookConfigs": {
                            "type": "array",
                            "items": _obj(
                                {
                                    "url": _STR,
                                    "urlSecret": _SECRET_KEY,
                                    "sendResolved": {"type": "boolean"},
                                    "maxAlerts": _INT,
                                }
                            ),
                        },
                    },
                    ["name"],
                ),
            },
        },
        ["route", "receivers"],
    ),
)

CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): SCALED_OBJECT,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"): ALERTMANAGER_CONFIG,
}
