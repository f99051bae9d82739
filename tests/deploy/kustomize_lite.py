"""A small offline renderer for deploy/k8s, used where no `kustomize`/`kubectl` binary is found.

It implements only what deploy/k8s uses, with kustomize's semantics:

- `resources` (files or directories with a kustomization.yaml) and `components`;
- `patches` with a `path`: strategic-merge patches matched by kind and name, where `null`
  deletes a field and lists of containers, env, volumes and volumeMounts merge by name (other
  lists are replaced);
- `namespace` (set on namespaced resources; Namespace objects are renamed),
- `labels` with `pairs`, `includeTemplates` (pod and volume claim templates), no selectors;
- `images` (name -> newName/newTag) and `replicas`;
- `replacements` (last, as kustomize runs them) of one field, by a source selected by kind and
  name, with `delimiter`/`index` options; field paths may select list items (`[name=x]`).

test_k8s.py checks that its output equals `kubectl kustomize` where that binary exists.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
MERGE_BY_NAME = {"containers", "initContainers", "env", "volumes"}
MERGE_BY_KEY = {"volumeMounts": "mountPath", "ports": "containerPort"}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def load_documents(path: Path) -> list[Resource]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def build(directory: Path) -> list[Resource]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    resources: list[Resource] = []
    for entry in spec.get("resources", []):
        target = (directory / entry).resolve()
        resources += build(target) if target.is_dir() else load_documents(target)
    for entry in spec.get("components", []):
        resources = build_component((directory / entry).resolve(), resources)
    return transform(directory, spec, resources)


def build_component(directory: Path, resources: list[Resource]) -> list[Resource]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert spec["kind"] == "Component", directory
    own = [r for e in spec.get("resources", []) for r in load_documents(directory / e)]
    return transform(directory, spec, resources + own)


def transform(directory: Path, spec: dict[str, Any], resources: list[Resource]) -> list[Resource]:
    resources = copy.deepcopy(resources)
    for patch in spec.get("patches", []):
        for doc in load_documents(directory / patch["path"]):
            target = find(resources, doc["kind"], doc["metadata"]["name"])
            merge(target, doc)
    if namespace := spec.get("namespace"):
        for r in resources:
            if r["kind"] == "Namespace":
                r["metadata"]["name"] = namespace
            elif r["kind"] not in CLUSTER_SCOPED:
                r["metadata"]["namespace"] = namespace
    for label in spec.get("labels", []):
        for r in resources:
            r["metadata"].setdefault("labels", {}).update(label["pairs"])
            template = pod_template(r)
            if not label.get("includeTemplates"):
                continue
            claims = r["spec"].get("volumeClaimTemplates", []) if r["kind"] == "StatefulSet" else []
            for meta in [t.setdefault("metadata", {}) for t in claims] + (
                [template.setdefault("metadata", {})] if template is not None else []
            ):
                meta.setdefault("labels", {}).update(label["pairs"])
    for image in spec.get("images", []):
        for container in all_containers(resources):
            name = container["image"].split("@")[0].rsplit(":", 1)[0]
            if name == image["name"]:
                new = image.get("newName", name)
                container["image"] = f"{new}:{image['newTag']}" if "newTag" in image else new
    for replicas in spec.get("replicas", []):
        for r in resources:
            if r["kind"] in WORKLOADS and r["metadata"]["name"] == replicas["name"]:
                r["spec"]["replicas"] = replicas["count"]
    for replacement in spec.get("replacements", []):
        source = replacement["source"]
        parent, key = field(find(resources, source["kind"], source["name"]), source["fieldPath"])
        value = str(parent[key])
        if options := source.get("options"):
            value = value.split(options["delimiter"])[options.get("index", 0)]
        for target in replacement["targets"]:
            select = target["select"]
            for r in [r for r in resources if r["kind"] == select["kind"]]:
                if select.get("name", r["metadata"]["name"]) != r["metadata"]["name"]:
                    continue
                for path in target["fieldPaths"]:
                    parent, key = field(r, path)
                    parent[key] = delimited(str(parent[key]), value, target.get("options"))
    return resources


def field(resource: Resource, path: str) -> tuple[Any, Any]:
    """The container of a field and its key: `a.b.[name=x].c` selects by name in a list."""
    node: Any = resource
    steps = path.split(".")
    for step in steps[:-1]:
        if step.startswith("[") and "=" in step:
            name, wanted = step[1:-1].split("=", 1)
            node = next(item for item in node if item.get(name) == wanted)
        else:
            node = node[step]
    return node, steps[-1]


def delimited(current: str, value: str, options: dict[str, Any] | None) -> str:
    """kustomize's replacement options: replace part `index` of `current` split by `delimiter`
    (beyond the end: append; negative: prepend)."""
    if not options:
        return value
    parts = current.split(options["delimiter"])
    index = options.get("index", 0)
    if index < 0:
        parts.insert(0, value)
    elif index >= len(parts):
        parts.append(value)
    else:
        parts[index] = value
    return str(options["delimiter"]).join(parts)


def find(resources: list[Resource], kind: str, name: str) -> Resource:
    for r in resources:
        if r["kind"] == kind and r["metadata"]["name"] == name:
            return r
    raise KeyError(f"no {kind}/{name} to patch")


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        elif (
            isinstance(value, list)
            and isinstance(target.get(key), list)
            and (key in MERGE_BY_NAME or key in MERGE_BY_KEY)
        ):
            field = MERGE_BY_KEY.get(key, "name")
            existing = {item[field]: item for item in target[key]}
            for item in value:
                if item[field] in existing:
                    merge(existing[item[field]], item)
                else:
                    target[key].append(copy.deepcopy(item))
        else:
            target[key] = copy.deepcopy(value)


def pod_template(resource: Resource) -> dict[str, Any] | None:
    if resource["kind"] in WORKLOADS:
        template: dict[str, Any] = resource["spec"]["template"]
        return template
    if resource["kind"] == "CronJob":
        template = resource["spec"]["jobTemplate"]["spec"]["template"]
        return template
    return None


def all_containers(resources: list[Resource]) -> list[dict[str, Any]]:
    found = []
    for r in resources:
        template = pod_template(r)
        if template is not None:
            spec = template["spec"]
            found += spec.get("containers", []) + spec.get("initContainers", [])
    return found
