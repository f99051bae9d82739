"""Prometheus scrapes Flower's /metrics without credentials (deploy/prometheus, the
memora-flower ServiceMonitor): a real Flower with basic auth on keeps its UI closed and its
metrics open."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def test_flower_metrics_are_open_behind_basic_auth(redis_url: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MEMORA_BROKER_URL": redis_url, "FLOWER_BASIC_AUTH": "ops:S3cret-value"}
    command = [sys.executable, "-m", "celery", "-A", "services.workers.tasks", "flower"]
    flower = subprocess.Popen(
        [*command, f"--port={port}", "--address=127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: _status(f"{base}/metrics"), timeout=90) == 200
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain")
        assert _status(f"{base}/") == 401
    finally:
        flower.terminate()
        flower.wait(timeout=30)
