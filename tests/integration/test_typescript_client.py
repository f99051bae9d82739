"""The TypeScript client (clients/typescript) against the deployed topology: the write API
forwarding to the query service, both under uvicorn on free ports (as test_client.py serves
them), on the suite's PostgreSQL with the pipeline inline. Node runs the client's own tests
(node:test) with MEMORA_URL pointing at the write API.

Also: the checked-in openapi.json is what the apps describe now, and src/schema.ts is what
openapi-typescript makes of it. Needs Node 20 and npm (and the npm registry for `npm ci`, run
only when clients/typescript/node_modules is missing or was installed from another
package-lock.json); a missing npm fails the test rather than skipping it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memora.webhooks import signing

pytestmark = pytest.mark.integration

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "typescript"
# What `npm ci` was last run for: the lock file's hash, kept inside node_modules.
STAMP = PACKAGE / "node_modules" / ".memora-lock-sha256"
TESTS = ["build/test/client.test.js", "build/test/offline.test.js"]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} not found on PATH: the TypeScript client's tests need Node 20 and npm "
            "(clients/typescript/README.md)",
            pytrace=False,
        )
    return path


def _run(args: list[str], what: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """Runs `args` in clients/typescript; fails the test with its output unless it exits 0."""
    started = time.monotonic()
    done = subprocess.run(
        args,
        cwd=PACKAGE,
        env={**os.environ, "npm_config_update_notifier": "false", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"{what} exited {done.returncode} after {time.monotonic() - started:.0f}s\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}",
            pytrace=False,
        )
    return done.stdout


@pytest.fixture(scope="module")
def npm() -> str:
    node = _tool("node")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    if major < 20:
        pytest.fail(f"Node {version.stdout.strip()}: the TypeScript client needs Node 20 or newer")
    npm = _tool("npm")
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text().strip() != lock:
        _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], "npm ci", timeout=600)
        STAMP.write_text(lock + "\n")
    return npm


@pytest.fixture(scope="module")
def built(npm: str) -> str:
    _run([npm, "run", "--silent", "build"], "npm run build", timeout=300)
    return npm


def _signed_delivery() -> str:
    """A delivery signed by the server's own code, for the client to verify."""
    secret = signing.generate_secret()
    body = json.dumps(
        {
            "type": "operation.completed",
            "timestamp": "2026-11-26T06:03:40.008Z",
            "data": {"agent_id": "zoë", "kind": "ingest", "status": "completed"},
        },
        ensure_ascii=False,
    )
    headers = signing.headers(secret, "msg_ts_client", int(time.time()), body.encode())
    return json.dumps({"secret": secret, "headers": headers, "body": body})


def test_openapi_json_is_current() -> None:
    """clients/typescript/openapi.json is what the write API and query service describe."""
    script = PACKAGE / "scripts" / "export_openapi.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr + done.stdout


def test_schema_ts_is_current(npm: str) -> None:
    """src/schema.ts is openapi-typescript's output for openapi.json."""
    _run([npm, "run", "--silent", "check-schema"], "npm run check-schema", timeout=120)


def test_client_against_the_stack(built: str, client_url: str) -> None:
    env = {"MEMORA_URL": client_url, "MEMORA_WEBHOOK_FIXTURE": _signed_delivery()}
    env["MEMORA_API_KEY"] = ""  # the suite's stack asks for none
    node = _tool("node")
    out = _run(
        [node, "--test", "--test-reporter=spec", *TESTS], "node --test", timeout=300, env=env
    )
    summary = dict(re.findall(r"(tests|pass|fail|skipped) (\d+)", out))
    assert summary.get("fail") == "0" and summary.get("skipped") == "0", out
    assert int(summary.get("pass", "0")) >= 12, out
