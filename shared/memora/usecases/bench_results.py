"""Benchmark results files (`memora bench ... --out`) in the folder MEMORA_BENCH_RESULTS_DIR
names: listed and read for the web UI's Results view. Only `*.json` files directly in that
folder are served; any other name (a path, `..`) is refused."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memora.basics.errors import Invalid, NotFound
from memora.pipeline.context import AppContext

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}\.json$")
MAX_BYTES = 64 * 1024 * 1024


def _folder(folder: Path | None) -> Path:
    if folder is None:
        raise NotFound(
            "bench_results_not_configured",
            "no results folder: set MEMORA_BENCH_RESULTS_DIR on the server, or upload a file",
        )
    return folder


def list_results(app: AppContext) -> list[dict[str, Any]]:
    """The results files, newest first: name, size and when it was written."""
    root = _folder(app.settings.bench_results_dir)
    if not root.is_dir():
        return []
    files = [p for p in root.iterdir() if NAME.match(p.name) and p.is_file()]
    files.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return [
        {
            "name": p.name,
            "bytes": p.stat().st_size,
            "modified": datetime.fromtimestamp(p.stat().st_mtime, UTC),
        }
        for p in files
    ]


def read_result(app: AppContext, name: str) -> dict[str, Any]:
    root = _folder(app.settings.bench_results_dir)
    if not NAME.match(name):
        raise Invalid("invalid_name", "a results file is named like results-1.json (no paths)")
    path = root / name
    if path.resolve().parent != root.resolve() or not path.is_file():
        raise NotFound("not_found", f"no results file {name!r}")
    if path.stat().st_size > MAX_BYTES:
        raise Invalid("file_too_large", f"{name} is over {MAX_BYTES // 2**20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid("invalid_results_file", f"{name} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise Invalid("invalid_results_file", f"{name} is not a `memora bench` results file")
    return data
