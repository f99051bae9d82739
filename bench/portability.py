"""Export and import (docs/operations.md "Export and import"): how fast an agent leaves one
server and enters another, and how large its file is.

    python bench/portability.py --memories 2000
    python bench/portability.py --quick       # a smoke test: 200 memories

An embedded PostgreSQL with two databases (the source and a fresh target), the write API
in-process on each with the pipeline run inline. --memories generated statements (as
bench/ingest.py's) are posted to one agent in batches of 100 and processed (entities, links);
the agent is exported (`GET /api/agents/{a}/export`, streamed to a file), imported into the
target (`POST /api/import`, streamed from the file), and imported again (every row already
there). Reported: the rows of each type, the file's bytes, and the seconds and rows/s of the
export, the import and the re-import.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import psycopg
from fastapi.testclient import TestClient
from ingest import generated_sessions

from memora.basics.config import Settings
from memora.db.migrate import upgrade
from memora.db.pool import make_pool
from memora.infra.embedded import EmbeddedPostgres
from memora.pipeline.backend import InlineBackend
from memora.pipeline.runner import Pipeline
from services.api.app import create_app

AGENT = "bench-portability"


def _api(settings: Settings, url: str) -> Any:
    pool = make_pool(url, max_size=4, name="bench")
    app = create_app(
        settings.model_copy(update={"database_url": url}),
        pool=pool,
        backend=InlineBackend(Pipeline(settings, pool)),
    )
    return TestClient(app)


def _ingest(api: Any, memories: int) -> None:
    items = [item for session in generated_sessions(memories) for item in session.items]
    for start in range(0, len(items), 100):
        body = {"agent_id": AGENT, "document_id": f"d{start}", "items": items[start : start + 100]}
        answer = api.post("/api/memories/batch", json=body)
        assert answer.status_code == 200, answer.text


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            yield chunk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    memories = 200 if args.quick else args.memories
    work = Path(tempfile.mkdtemp(prefix="memora-bench-portability-"))
    server = EmbeddedPostgres(work / "pg")
    source_url = server.start()
    target_url = source_url.rsplit("/", 1)[0] + "/memora_target"
    with psycopg.connect(source_url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE memora_target")
    settings = Settings(database_url=source_url, broker_url=None, data_dir=work)
    try:
        for url in (source_url, target_url):
            upgrade(url, settings.embedding_dim)
        with _api(settings, source_url) as source, _api(settings, target_url) as target:
            started = time.perf_counter()
            _ingest(source, memories)
            ingest_s = time.perf_counter() - started
            path = work / "agent.ndjson"
            started = time.perf_counter()
            with (
                source.stream("GET", f"/api/agents/{AGENT}/export") as answer,
                path.open("wb") as out,
            ):
                for chunk in answer.iter_bytes():
                    out.write(chunk)
            export_s = time.perf_counter() - started
            counts = json.loads(path.read_text().splitlines()[-1])["counts"]
            rows = sum(counts.values())
            timings = {"export": export_s}
            for name in ("import", "reimport"):
                started = time.perf_counter()
                answer = target.post("/api/import", content=_chunks(path))
                assert answer.status_code == 200, answer.text
                timings[name] = time.perf_counter() - started
        report = {
            "memories_posted": memories,
            "ingest_seconds": round(ingest_s, 1),
            "rows": counts,
            "file_bytes": path.stat().st_size,
            **{f"{k}_seconds": round(v, 2) for k, v in timings.items()},
            **{f"{k}_rows_per_second": round(rows / v) for k, v in timings.items()},
        }
        print(json.dumps(report, indent=2))
    finally:
        server.stop(quiet=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
