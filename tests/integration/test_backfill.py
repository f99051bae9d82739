"""`memora backfill` on real components: resume after an interruption or a crash, idempotency
(a second run adds nothing), refused documents, and the backfill queues of real workers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from memora.infra.embedded import free_port
from memora.interchange.archives import Checkpoint, read_documents
from services.cli.backfill.options import BackfillOptions
from services.cli.backfill.run import Backfill
from tests.conftest import wait_until
from tests.integration.metrics_support import value, worker_metrics

pytestmark = pytest.mark.integration
MEMORA = str(Path(sys.executable).parent / "memora")


def write_archive(path: Path, conversations: int, turns: int, *, agent: str) -> Path:
    """One message per line, conversations one after another."""
    with path.open("w", encoding="utf-8") as handle:
        for c in range(conversations):
            for t in range(turns):
                record = {
                    "agent_id": agent,
                    "conversation_id": f"conv-{c}",
                    "speaker": "Ana" if t % 2 else "Ben",
                    "text": f"We talked about hiking trip {c} near lake {t} with Carla.",
                    "timestamp": f"2024-03-{1 + c % 28:02d}T10:{t:02d}:00Z",
                }
                handle.write(json.dumps(record) + "\n")
    return path


def counts(pool: Any, agent: str) -> dict[str, int]:
    with pool.connection() as conn:
        row = conn.execute(
            """
            SELECT (SELECT count(*) FROM documents WHERE agent_id = %(a)s) AS documents,
                   (SELECT count(*) FROM operations WHERE agent_id = %(a)s) AS operations,
                   (SELECT count(*) FROM memory_units WHERE agent_id = %(a)s) AS units
            """,
            {"a": agent},
        ).fetchone()
    return dict(row)


class InterruptAfter:
    """An HTTP client that raises KeyboardInterrupt (Ctrl-C) from the n-th POST on (memora_client
    sends through `request`, the backpressure check through `get`)."""

    def __init__(self, client: Any, posts: int) -> None:
        self.client, self.left = client, posts

    def request(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "POST":
            if self.left <= 0:
                raise KeyboardInterrupt
            self.left -= 1
        return self.client.request(method, *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self.client.get(*args, **kwargs)


def _options(path: Path, checkpoint: Path, **extra: Any) -> BackfillOptions:
    return BackfillOptions(
        path=path,
        api_url="http://testserver",
        checkpoint=checkpoint,
        progress=False,
        **extra,
    )


def test_interrupted_backfill_resumes_and_a_second_run_adds_nothing(
    inline_api: TestClient, pool: Any, tmp_path: Path
) -> None:
    agent = f"bf-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=12, turns=3, agent=agent)
    cp = tmp_path / "cp.json"

    first = Backfill(
        _options(archive, cp, concurrency=3),
        InterruptAfter(inline_api, 5),  # type: ignore[arg-type]
    ).run()
    assert first.interrupted
    saved = Checkpoint.load(cp)
    assert saved is not None and not saved.finished
    assert saved.documents == first.documents and 1 <= saved.documents <= 5
    assert counts(pool, agent)["documents"] == 5  # what the API took, contiguous or not

    second = Backfill(_options(archive, cp), inline_api).run()  # type: ignore[arg-type]
    assert not second.interrupted and second.resumed_at == saved.documents
    assert second.documents == 12 - saved.documents
    assert second.outcomes.get("created", 0) + second.outcomes.get("unchanged", 0) == (
        second.documents
    )
    assert counts(pool, agent) == {"documents": 12, "operations": 12, "units": 36}
    final = Checkpoint.load(cp)
    assert final is not None and final.finished and final.documents == 12 and final.items == 36

    third = Backfill(_options(archive, cp), inline_api).run()  # type: ignore[arg-type]
    assert third.already_complete and third.documents == 0

    again = Backfill(_options(archive, cp, restart=True), inline_api).run()  # type: ignore[arg-type]
    assert again.outcomes == {"unchanged": 12} and again.items == 36
    assert counts(pool, agent) == {"documents": 12, "operations": 12, "units": 36}


def test_append_mode_makes_one_conversation_of_its_parts(
    inline_api: TestClient, pool: Any, tmp_path: Path
) -> None:
    """--update-mode append: the runs of message lines (split at --max-items) of one
    conversation become one conversation, in order; a second export with more messages
    adds only those."""
    agent = f"bf-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=2, turns=7, agent=agent)
    options = {"update_mode": "append", "max_items": 3, "concurrency": 3}
    first = Backfill(_options(archive, tmp_path / "1.json", **options), inline_api).run()  # type: ignore[arg-type]
    assert first.failed == 0 and first.documents == 6  # 3 + 3 + 1 per conversation
    longer = write_archive(tmp_path / "b.jsonl", conversations=2, turns=9, agent=agent)
    second = Backfill(_options(longer, tmp_path / "2.json", **options), inline_api).run()  # type: ignore[arg-type]
    assert second.failed == 0
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT d.document_id, m.text FROM conversation_messages m JOIN documents d "
            "ON d.id = m.document_pk WHERE d.agent_id = %s ORDER BY d.document_id, m.position",
            (agent,),
        ).fetchall()
    assert sorted({r["document_id"] for r in rows}) == ["conv-0", "conv-1"]
    for c in range(2):
        texts = [r["text"] for r in rows if r["document_id"] == f"conv-{c}"]
        assert texts == [
            f"We talked about hiking trip {c} near lake {t} with Carla." for t in range(9)
        ]
    assert counts(pool, agent)["units"] == 18


def test_crash_before_the_last_checkpoint_reposts_without_duplicates(
    inline_api: TestClient, pool: Any, tmp_path: Path
) -> None:
    agent = f"bf-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=8, turns=2, agent=agent)
    cp = tmp_path / "cp.json"
    Backfill(_options(archive, cp), InterruptAfter(inline_api, 6)).run()  # type: ignore[arg-type]
    # a crash (SIGKILL) loses what happened after the last periodic save: rewind to doc 2
    docs = list(read_documents(archive, "jsonl"))
    saved = Checkpoint.load(cp)
    assert saved is not None
    saved.resume, saved.documents = docs[1].resume, 2
    saved.save(cp)
    resumed = Backfill(_options(archive, cp), inline_api).run()  # type: ignore[arg-type]
    assert resumed.outcomes == {"unchanged": 4, "created": 2}
    assert counts(pool, agent) == {"documents": 8, "operations": 8, "units": 16}


def test_refused_documents_are_logged_and_the_run_goes_on(
    inline_api: TestClient, pool: Any, tmp_path: Path
) -> None:
    agent = f"bf-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "a.jsonl"
    with path.open("w") as handle:
        for conv, text in (("ok-1", "fine"), ("huge", "x" * 200_001), ("ok-2", "fine too")):
            handle.write(json.dumps({"conversation_id": conv, "agent_id": agent, "text": text}))
            handle.write("\n")
        handle.write("{broken\n")
    summary = Backfill(_options(path, tmp_path / "cp.json"), inline_api).run()  # type: ignore[arg-type]
    assert summary.failed == 1 and summary.outcomes == {"created": 2}
    assert summary.skipped_items == 1  # the broken line
    assert summary.failures_log is not None
    (failure,) = [json.loads(line) for line in Path(summary.failures_log).read_text().splitlines()]
    assert failure["document_id"] == "huge#L2" and "content_too_long" in failure["error"]
    assert counts(pool, agent)["documents"] == 2


# ------------------------------------------------------------------ the CLI, real workers
class SlowPosts:
    """Delays each POST a little, so that a Ctrl-C lands in the middle of a small backfill."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            await asyncio.sleep(0.1)
        await self.app(scope, receive, send)


@pytest.fixture()
def served_api(worker_stack: Any, pool: Any) -> Iterator[str]:
    """The write API over HTTP, enqueueing to the real broker and workers."""
    from services.api.app import create_app

    settings = worker_stack.settings.model_copy(update={"metrics_cache_seconds": 0})
    port = free_port()
    config = uvicorn.Config(
        SlowPosts(create_app(settings, pool=pool)), host="127.0.0.1", port=port, log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _up(url), 60)
    yield url
    server.should_exit = True
    thread.join(timeout=30)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health/live", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _ctrl_c_works() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cli(*args: str) -> list[str]:
    return [MEMORA, "backfill", *args, "--no-progress", "--concurrency", "1"]


def test_cli_ctrl_c_resume_wait_on_backfill_queues(
    served_api: str, worker_stack: Any, pool: Any, tmp_path: Path
) -> None:
    agent = f"cli-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=30, turns=2, agent=agent)
    cp = tmp_path / "cp.json"
    env = dict(os.environ, MEMORA_DATA_DIR=str(tmp_path))
    args = _cli(str(archive), "--api", served_api, "--checkpoint", str(cp))
    # Ctrl-C as at a terminal, however the suite was started (a shell's background job
    # inherits SIGINT ignored, and Python keeps it so)
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_ctrl_c_works
    )
    wait_until(lambda: cp.exists() and json.loads(cp.read_text())["documents"] >= 3, 60, 0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert b"interrupted" in err
    interrupted = Checkpoint.load(cp)
    assert interrupted is not None and 3 <= interrupted.documents < 30

    before = worker_metrics(worker_stack, "extract")
    done = subprocess.run(
        [*args, "--wait", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["resumed_at"] == interrupted.documents
    assert summary["documents"] == 30 - interrupted.documents
    assert summary["searchable_seconds"] is not None and summary["failed_operations"] == 0
    assert "backfill summary" in done.stderr
    assert counts(pool, agent) == {"documents": 30, "operations": 30, "units": 60}
    with pool.connection() as conn:
        statuses = conn.execute(
            "SELECT DISTINCT status FROM operations WHERE agent_id = %s", (agent,)
        ).fetchall()
    assert [r["status"] for r in statuses] == ["completed"]
    after = worker_metrics(worker_stack, "extract")
    moved = value(after, "memora_task_successes_total", queue="extract.backfill") - value(
        before, "memora_task_successes_total", queue="extract.backfill"
    )
    assert moved >= summary["outcomes"].get("created", 0)

    again = subprocess.run(
        [*args, "--restart", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["outcomes"] == {"unchanged": 30}
    assert counts(pool, agent) == {"documents": 30, "operations": 30, "units": 60}
