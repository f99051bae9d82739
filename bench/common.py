"""What the stack benchmarks share: the embedded stack on free ports, and latencies read from
the operations' own timestamps (bench/ingest.py, bench/append.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from services.cli.stack import Stack


@contextmanager
def embedded_stack(
    *, with_query: bool = False, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """The whole stack on the single-machine default (embedded PostgreSQL and Redis, the write
    API, one Celery worker per stage, beat; the query service if asked), its data and logs in a
    new temporary folder; yields the write API's base URL once every service is ready."""
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="memora-bench-")),
        port=free_port(),
        query_port=free_port(),
    )
    with Stack(
        settings,
        log_dir=settings.data_dir / "logs",
        with_query=with_query,
        extra_env=dict(env or {}),
    ) as stack:
        stack.wait_ready()
        yield f"http://{settings.host}:{settings.port}"


def seconds_after_post(
    ops: list[dict[str, Any]], sent: Mapping[str, float], stage: str | None = None
) -> list[float]:
    """Per operation (GET /api/operations/{id} bodies), the seconds from its POST (`sent`:
    operation id → epoch seconds) until `stage` finished (`links`: its memories are searchable
    by every retriever), or, with no stage, until the operation finished (conversation index
    included). Operations without that time are left out."""
    out = []
    for op in ops:
        at = op["stages"].get(stage, {}).get("finished_at") if stage else op["finished_at"]
        if at:
            out.append(datetime.fromisoformat(at).timestamp() - sent[op["id"]])
    return out
