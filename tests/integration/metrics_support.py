"""Reading Prometheus expositions in tests."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, lbl), v in samples.items() if n == name and wanted <= lbl)


def worker_metrics(stack: Any, name: str) -> Samples:
    """A Stack worker's /metrics, once it is up (the server starts when the worker is ready)."""
    url = f"http://127.0.0.1:{stack.metrics_ports[name]}/metrics"

    def get() -> str | None:
        try:
            return httpx.get(url, timeout=10).text
        except httpx.TransportError:
            return None

    return scrape(wait_until(get, 180, interval=0.5))
