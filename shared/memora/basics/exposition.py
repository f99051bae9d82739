"""How the metrics are exposed: the registry to scrape (every process's value files in
multiprocess mode, else this process's), its text format, the value files' housekeeping, and
the names PromQL sees. The metrics themselves: memora.basics.metrics."""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client import multiprocess as _multiprocess

NAMESPACE = "memora"  # every metric's name prefix

if _dir := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.makedirs(_dir, exist_ok=True)  # value files are opened as metrics are created


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR")


def exposition_registry() -> CollectorRegistry:
    """The registry to expose: every process's files in multiprocess mode, else this process."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


def render() -> tuple[bytes, str]:
    """The text exposition format and its content type."""
    return generate_latest(exposition_registry()), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Drop a finished process's live gauges (multiprocess mode only)."""
    if multiprocess_dir():
        _multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def remove_stale_files(directory: str, keep_pid: int) -> int:
    """Delete value files of other processes (a previous run's) from a multiprocess directory;
    returns how many were removed. Only safe while no other live process writes there."""
    removed = 0
    if not os.path.isdir(directory):
        return 0
    for name in os.listdir(directory):
        if not name.endswith(".db"):
            continue
        pid = name[:-3].rsplit("_", 1)[-1]
        if pid.isdigit() and int(pid) != keep_pid:
            try:
                os.remove(os.path.join(directory, name))
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def metric_names(registry: CollectorRegistry = REGISTRY) -> set[str]:
    """Every Memora sample name as PromQL sees it (`_total`, `_bucket`, ... included)."""
    names: set[str] = set()
    for family in registry.collect():
        if not family.name.startswith(f"{NAMESPACE}_"):
            continue
        names.add(family.name)
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created"),
        }.get(family.type, ())
        names.update(family.name + s for s in suffixes)
    return names
