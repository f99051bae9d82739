"""`memora serve`: the whole embedded stack in the foreground, stopped cleanly by SIGTERM."""

from __future__ import annotations

import os
import re
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


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


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


def _serve(data_dir: Path, log: Path, **env: str) -> subprocess.Popen[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_")}
    clean.update(MEMORA_DATA_DIR=str(data_dir), **env)
    memora = str(Path(sys.executable).parent / "memora")
    with log.open("wb") as out:
        return subprocess.Popen(
            [memora, "serve"], env=clean, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """After a failed assertion: stop the stack as Ctrl-C would, so that its children do not
    outlive the test."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_serve_starts_everything_and_sigterm_stops_every_process() -> None:
    """The query port left to derive (the API's + 1) is taken: serve takes another, says so,
    reports each component as it becomes ready, and SIGTERM then stops every process."""
    data_dir = Path(tempfile.mkdtemp(prefix="memora-serve-", dir=tempfile.gettempdir()))
    log = data_dir / "serve.out"
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1] - 1  # its + 1 is taken
        if not _free(port):
            pytest.skip(f"port {port} is in use here")
        proc = _serve(data_dir, log, MEMORA_PORT=str(port))
        try:
            wait_until(lambda: "Memora is ready" in log.read_text(), timeout=240, interval=1)
        finally:
            if proc.poll() is not None or "Memora is ready" not in log.read_text():
                _stop(proc)
    try:
        said = log.read_text()
        moved = re.search(
            rf"port {port + 1} \(the API's \+ 1\) is in use: the query service takes (\d+)", said
        )
        assert moved, said
        query_port = int(moved.group(1))
        for part in ("PostgreSQL", "Redis", "schema", "worker embed", "query service", "API"):
            assert re.search(rf"^\s+[\d.]+ s  {part}", said, re.M), (part, said)
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

        # a second stack on the same data folder (the README's second line, say) stops at once
        second = _serve(data_dir, data_dir / "second.out", MEMORA_PORT=str(free_port()))
        assert second.wait(timeout=30) == 1
        said = (data_dir / "second.out").read_text().strip()
        assert said.endswith(
            "is in use by another stack: set another with MEMORA_DATA_DIR or --data-dir"
        ), said
        assert _ready(f"http://127.0.0.1:{port}/health/ready")  # the first one untouched
        assert not _gone(pg_pid)
        _a_second_stack_beside_it(data_dir)
        assert _ready(f"http://127.0.0.1:{port}/health/ready")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
        time.sleep(0.5)
        assert [c.pid for c in children if not _gone(c.pid)] == []
        assert _gone(pg_pid)
        assert not _listening(port) and not _listening(query_port)
    finally:
        _stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def _a_second_stack_beside_it(first: Path) -> None:
    """The README's second line: its own port and data folder, ready beside the first, and
    searched; SIGTERM stops it alone."""
    data_dir = first / "second-stack"
    log = first / "beside.out"
    port = free_port()
    proc = _serve(data_dir, log, MEMORA_PORT=str(port))
    try:
        wait_until(lambda: "Memora is ready" in log.read_text(), timeout=240, interval=1)
        found = httpx.post(
            f"http://127.0.0.1:{port}/api/search", json={"agent_id": "a", "query": "hi"}
        )
        assert found.status_code == 200 and found.json()["results"] == [], found.text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
    finally:
        _stop(proc)


def test_sigterm_while_starting_stops_every_process_at_once() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="memora-serve-", dir=tempfile.gettempdir()))
    proc = _serve(data_dir, data_dir / "serve.out", MEMORA_PORT=str(free_port()))
    try:
        # workers loading their models, nothing ready yet
        wait_until(lambda: len(psutil.Process(proc.pid).children()) >= 6, timeout=60)
        time.sleep(3)
        children = psutil.Process(proc.pid).children(recursive=True)
        pg_pid = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)  # the bound is 10 s; a loaded CI machine gets more
        assert [c.pid for c in children if not _gone(c.pid)] == []
        assert _gone(pg_pid)
        assert "Memora is ready" not in (data_dir / "serve.out").read_text()
    finally:
        _stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_set_port_in_use_stops_at_once_naming_it() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="memora-serve-", dir=tempfile.gettempdir()))
    log = data_dir / "serve.out"
    try:
        with socket.socket() as blocker:
            blocker.bind(("127.0.0.1", 0))
            blocker.listen()
            taken = blocker.getsockname()[1]
            for env, setting in (
                ({"MEMORA_PORT": str(taken)}, "MEMORA_PORT or --port"),
                (
                    {"MEMORA_PORT": str(free_port()), "MEMORA_QUERY_PORT": str(taken)},
                    "MEMORA_QUERY_PORT or --query-port",
                ),
            ):
                proc = _serve(data_dir, log, **env)
                assert proc.wait(timeout=30) == 1
                said = log.read_text().strip()
                assert said == f"port {taken} is in use: set another with {setting}", said
                assert not (data_dir / "pgdata").exists()  # nothing was started
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
