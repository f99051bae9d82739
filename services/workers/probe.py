"""The worker heartbeat file, shared by the worker (which touches it) and `memora worker-ready`
(a Kubernetes exec probe that reads it). Imports nothing heavy: a probe must start fast."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from memora.basics.config import Settings

DEFAULT_MAX_AGE = 30.0


def heartbeat_path(settings: Settings) -> Path:
    return settings.worker_heartbeat_file or settings.data_dir / "worker.heartbeat"


def check_heartbeat(path: Path, max_age: float = DEFAULT_MAX_AGE) -> tuple[bool, str]:
    """Ready when the file exists and was touched within `max_age` seconds: the worker's
    consumer finished starting and keeps sending event heartbeats through the broker."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return False, f"no heartbeat file {path}: the worker is starting or stopped"
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(path.read_text() or "{}")
    who = info.get("hostname") or "worker"
    if age > max_age:
        return False, f"{who}: last heartbeat {age:.0f}s ago (limit {max_age:.0f}s)"
    return True, f"{who}: ready (heartbeat {age:.1f}s ago)"
