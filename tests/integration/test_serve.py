"""`memora serve`: the whole embedded stack in the foreground, stopped cleanly by SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import pytest

from memora.infra.embedded import free_port
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_serve_starts_everything_and_sigterm_stops_every_process() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="memora-serve-", dir=tempfile.gettempdir()))
    port, query_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_")}
    env.update(
        MEMORA_DATA_DIR=str(data_dir), MEMORA_PORT=str(port), MEMORA_QUERY_PORT=str(query_port)
    )
    memora = str(Path(sys.executable).parent / "memora")
    proc = subprocess.Popen([memora, "serve"], env=env, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: _ready(f"http://127.0.0.1:{port}/health/ready"), timeout=240, interval=1)
        ready = httpx.get(f"http://127.0.0.1:{port}/health/ready").json()
        # under serve, ready means what a request needs answers: query service and workers
        assert ready["checks"] == {"database": True, "query_service": True, "workers": True}
        assert ready["informational"] == {"broker": True}
        workers = httpx.get(f"http://127.0.0.1:{port}/health/workers", timeout=10)
        assert workers.status_code == 200 and workers.json()["workers"] >= 6, workers.text
        assert _ready(f"http://127.0.0.1:{query_port}/health/ready")
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 8  # redis, api, query, beat, five workers (and their pools)
        pg_pid = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
        time.sleep(0.5)
        assert [c.pid for c in children if not _gone(c.pid)] == []
        assert _gone(pg_pid)
        assert not _listening(port) and not _listening(query_port)
    finally:
        if proc.poll() is None:  # a failed assertion: stop the stack as Ctrl-C would, so
            proc.send_signal(signal.SIGTERM)  # that its children do not outlive the test
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
