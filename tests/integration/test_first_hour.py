"""What a new user meets in the first hour, on the whole stack as `memora serve` runs it (the
session's `served`, tests/integration/conftest.py, which the browser's tests share; its
extractor is the LLM's, the fake server's answers scripted here):

- once the write API answers /health/ready, what a script does next works at once (no 503
  from the query service behind it, no task waiting for a worker still loading its models),
  and every worker loaded its models before it took work;
- every `curl` command in the README and docs/ works as written (on this stack's port).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from memora.extraction.llm import MARKER
from tests.conftest import wait_until
from tests.fakes import FakeOpenAI, Reply

pytestmark = pytest.mark.integration

MODELS = {"extract": "nlp", "embed": "embedder", "entities": "nlp", "index_messages": "embedder"}


REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _facts(text: str, *entities: tuple[str, str]) -> Reply:
    """The extractor's answer: one fact, of the first item."""
    named = [{"name": n, "type": t} for n, t in entities]
    return Reply({"facts": [{"item": 0, "text": text, "fact_type": "world", "entities": named}]})


def test_after_ready_the_first_requests_succeed(served: Any, fake_llm: FakeOpenAI) -> None:
    base = f"http://{served.settings.host}:{served.settings.port}"
    fake_llm.always(
        _facts("Maya is planning a trip to Kyoto.", ("Maya", "PERSON"), ("Kyoto", "LOCATION")),
        when=MARKER,
    )
    ready = httpx.get(f"{base}/health/ready").json()
    assert ready["checks"] == {"database": True, "query_service": True, "workers": True}
    search = httpx.post(f"{base}/api/search", json={"agent_id": "first-hour", "query": "Kyoto"})
    assert search.status_code == 200, search.text
    batch = {"agent_id": "first-hour", "items": [{"content": "Maya is planning a trip to Kyoto."}]}
    accepted = httpx.post(f"{base}/api/memories/batch", json=batch)
    assert accepted.status_code == 200, accepted.text
    operation = f"{base}/api/operations/{accepted.json()['operation_id']}"

    def finished() -> str | None:
        status = httpx.get(operation).json()["status"]
        return status if status in ("completed", "failed") else None

    assert wait_until(finished, 60, 0.2) == "completed"
    found = httpx.post(f"{base}/api/search", json={"agent_id": "first-hour", "query": "Kyoto"})
    assert any("Kyoto" in r["text"] for r in found.json()["results"])


def test_each_worker_loaded_its_models_before_it_took_work(served: Any) -> None:
    for worker, model in MODELS.items():
        log = (served.log_dir / f"worker-{worker}.log").read_text()
        loading = re.search(r"loading models before taking work: (\S+)", log)
        ready = re.search(r"@\S+ ready\.", log)
        assert loading and ready, f"{worker}: {log[-2000:]}"
        assert model in loading.group(1).split(",")
        assert loading.start() < ready.start(), worker


def documented_curls(path: Path) -> list[str]:
    """The `curl` commands of a Markdown file's bash blocks, continuation lines joined."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(), flags=re.S):
        lines = block.replace("\\\n", " ").splitlines()
        command: list[str] = []
        for line in (re.sub(r"\s+# .*$", "", line) for line in lines):  # comments out
            if command or line.startswith("curl "):
                command.append(line)
                if _complete("\n".join(command)):  # a JSON body spans lines
                    commands.append("\n".join(command))
                    command = []
    return commands


def _complete(command: str) -> bool:
    try:
        shlex.split(command)
    except ValueError:  # no closing quotation yet
        return False
    return True


def test_the_documented_commands_find_curl_commands() -> None:
    readme = documented_curls(REPO / "README.md")
    assert any("/api/memories/batch" in c and '"document_id"' in c for c in readme), readme


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that accepts every delivery (the docs' hooks.example.com)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _wait_for(base: str, operations: list[str]) -> None:
    """Until every operation started so far has ended."""
    from tests.conftest import wait_until

    def ended(op: str) -> bool:
        status = httpx.get(f"{base}/api/operations/{op}").json().get("status")
        return status in ("completed", "failed", "superseded")

    wait_until(lambda: all(ended(op) for op in operations), timeout=120)


def test_every_documented_curl_command_works(
    served: Any, fake_llm: FakeOpenAI, receiver: str, tmp_path: Path
) -> None:
    """Run in the docs' order with the stack's port; `<operation_id>` is the latest one
    returned, and the docs' webhook receiver is a local one. Only commands that need a file
    the docs ask the user to write are left out."""
    base = f"{served.settings.host}:{served.settings.port}"
    # whatever was posted: the README then looks Alice up as an entity
    fake_llm.always(_facts("Alice works at Google.", ("Alice", "PERSON")), when=MARKER)
    last: dict[str, str] = {}
    started: list[str] = []
    ran: list[str] = []
    for path in DOCUMENTED:
        for command in documented_curls(path):
            if " -d @" in command:
                continue  # a file of the user's (docs/mcp.md's cast.json)
            if "/entities/" in command:  # what the pipeline makes: after its operations end
                _wait_for(f"http://{base}", started)
            line = (
                command.replace("localhost:8080", base)
                .replace("<operation_id>", last.get("op", "none"))
                .replace("https://hooks.example.com", receiver)
            )
            out = tmp_path / "body"
            run = subprocess.run(
                ["bash", "-c", f"{line} -sS -o {out} -w '%{{http_code}}'"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            status = int(run.stdout[-3:] or 0)
            body = out.read_text() if out.exists() else ""
            where = f"{path.name}: {command.splitlines()[0]}"
            assert 200 <= status < 300, f"{where} -> {status} {body[:500]} {run.stderr}"
            ran.append(where)
            if body.startswith("{") and "operation_id" in (data := json.loads(body)):
                last["op"] = str(data["operation_id"])
                started.append(last["op"])
    assert len(ran) >= 8, ran
