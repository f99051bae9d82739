"""The read replica's lag during a load test: the query service's
`memora_read_replica_lag_seconds` (and where its reads went) read every half second while the
load runs, when the stack has a replica (`MEMORA_READ_REPLICAS=1`, docs/scaling.md)."""

from __future__ import annotations

import re
import threading
from types import TracebackType
from typing import Any

import httpx

LAG = re.compile(r"^memora_read_replica_lag_seconds (\S+)$", re.M)
READS = re.compile(r'^memora_reads_total\{reason="([^"]+)",source="([^"]+)"\} (\S+)$', re.M)


class LagSampler:
    def __init__(self, query_url: str, interval: float = 0.5) -> None:
        self.query_url, self.interval = query_url, interval
        self.samples: list[float] = []
        self.reads: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replica-lag", daemon=True)

    def __enter__(self) -> LagSampler:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(base_url=self.query_url, timeout=5) as client:
            while not self._stop.wait(self.interval):
                try:
                    text = client.get("/metrics").text
                except httpx.HTTPError:
                    continue  # the query service restarting: no sample
                if found := LAG.search(text):
                    self.samples.append(float(found.group(1)))
                self.reads = {f"{s}: {r}": float(n) for r, s, n in READS.findall(text)}

    def report(self) -> dict[str, Any]:
        """Lag percentiles in seconds over the samples (-1: the replica did not answer), and
        the query service's reads by where they went and why."""
        ordered = sorted(self.samples)
        if not ordered:
            return {"samples": 0}

        def at(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

        return {
            "samples": len(ordered),
            "lag_p50_s": at(0.5),
            "lag_p95_s": at(0.95),
            "lag_max_s": ordered[-1],
            "reads": self.reads,
        }
