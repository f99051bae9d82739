"""`memora backfill` against real write APIs served over HTTP: checkpoints kept per target and
archive content, MEMORA_API_URL / MEMORA_API_KEY, Retry-After honoured on 429, and a loud
warning when backpressure cannot read the queue depths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from rich.console import Console

from memora.basics import metrics
from memora.basics.config import Settings
from memora.infra.embedded import free_port
from memora.interchange.archives import Checkpoint, content_hash, target_of
from services.cli.backfill.options import BackfillOptions, default_checkpoint
from services.cli.backfill.run import Backfill
from tests.conftest import wait_until
from tests.integration.test_backfill import counts, write_archive

pytestmark = pytest.mark.integration
MEMORA = str(Path(sys.executable).parent / "memora")


@contextmanager
def serve(settings: Settings, pool: Any, pipeline: Any) -> Iterator[str]:
    """The write API (stages run inline) on a real port, in a thread."""
    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    port = free_port()
    app = create_app(settings, pool=pool, backend=InlineBackend(pipeline))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _up(url), 60)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health/live", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[str]:
    with serve(settings, pool, pipeline) as url:
        yield url


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MEMORA, "backfill", *args, "--no-progress", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def summary(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(run.stdout.splitlines()[-1]))


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORA_")}
    return env | {"MEMORA_DATA_DIR": str(tmp_path), "COLUMNS": "400"} | extra


def test_checkpoints_are_kept_per_target_and_content_through_the_environment(
    api: str, pool: Any, tmp_path: Path
) -> None:
    agent = f"bt-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=6, turns=2, agent=agent)
    # The inline API has no broker; queue depths an earlier test's API (same process, same
    # registry) recorded would still be exported.
    metrics.QUEUE_DEPTH.clear()

    first = _cli(_env(tmp_path, MEMORA_API_URL=api), str(archive))
    assert first.returncode == 0, first.stderr
    assert summary(first)["outcomes"] == {"created": 6}
    assert counts(pool, agent)["documents"] == 6
    # an API without queue depths: said loudly, on stderr and in the summary
    assert "warning: cannot read the backfill queue depths" in first.stderr
    assert summary(first)["backpressure"].startswith("off: ")

    again = _cli(_env(tmp_path, MEMORA_API_URL=api), str(archive))
    assert again.returncode == 0 and "already complete" in again.stderr

    # the same archive to "another server" (another URL): everything is posted again
    other = api.replace("127.0.0.1", "localhost")
    elsewhere = _cli(_env(tmp_path, MEMORA_API_URL=other), str(archive))
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert summary(elsewhere)["documents"] == 6 and not summary(elsewhere)["already_complete"]
    assert summary(elsewhere)["outcomes"] == {"unchanged": 6}  # same database behind it

    # the archive's content changed: a checkpoint of its own, everything posted
    with archive.open("a") as handle:
        handle.write(json.dumps({"agent_id": agent, "conversation_id": "late", "text": "hi"}))
        handle.write("\n")
    grown = _cli(_env(tmp_path, MEMORA_API_URL=api), str(archive))
    assert grown.returncode == 0, grown.stderr
    assert summary(grown)["documents"] == 7
    assert summary(grown)["outcomes"] == {"unchanged": 6, "created": 1}

    saved = sorted((tmp_path / "backfill").glob("*.checkpoint.json"))
    assert len(saved) == 3
    for path in saved:
        checkpoint = Checkpoint.load(path)
        assert checkpoint is not None and checkpoint.finished and checkpoint.target


def test_the_checkpoint_key_hides_the_api_key_and_separates_keys(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.jsonl", conversations=1, turns=1, agent="a")
    content = content_hash(archive)
    secret = "mk_live_" + "s" * 32
    target = target_of("http://API:8080/", secret)
    assert secret not in target and target.startswith("http://api:8080 key:")
    paths = {
        default_checkpoint(tmp_path, archive, t, content)
        for t in (target, target_of("http://api:8080", "another-key-" + "x" * 16))
    }
    assert len(paths) == 2
    assert default_checkpoint(tmp_path, archive, target, content) in paths


def test_explicit_checkpoint_for_another_target_is_refused(
    api: str, pool: Any, tmp_path: Path
) -> None:
    agent = f"bt-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=2, turns=1, agent=agent)
    cp = tmp_path / "cp.json"
    first = _cli(_env(tmp_path), str(archive), "--api", api, "--checkpoint", str(cp))
    assert first.returncode == 0, first.stderr
    other = api.replace("127.0.0.1", "localhost")
    refused = _cli(_env(tmp_path), str(archive), "--api", other, "--checkpoint", str(cp))
    assert refused.returncode == 1
    assert "is for another target" in refused.stderr


def test_retry_after_on_429_is_honoured(
    settings: Settings, pool: Any, pipeline: Any, tmp_path: Path
) -> None:
    """Three posts per 4 s: with two retries, exponential back-off (0.5 s, 1 s) would give up;
    waiting the Retry-After the API sends gets every document in."""
    limited = settings.model_copy(
        update={"rate_limit": "3/4 seconds", "rate_limit_storage_url": "memory://"}
    )
    agent = f"bt-{uuid.uuid4().hex[:8]}"
    archive = write_archive(tmp_path / "a.jsonl", conversations=8, turns=1, agent=agent)
    with serve(limited, pool, pipeline) as url, httpx.Client(base_url=url, timeout=30) as client:
        options = BackfillOptions(
            path=archive,
            api_url=url,
            checkpoint=tmp_path / "cp.json",
            concurrency=1,
            retries=2,
            progress=False,
        )
        result = Backfill(options, client, Console(stderr=True)).run()
    assert result.documents == 8 and result.failed == 0
    assert result.outcomes == {"created": 8}
    assert result.retry_after_waits >= 1
    assert result.retry_after_seconds >= result.retry_after_waits  # whole seconds, >= 1
    assert counts(pool, agent)["documents"] == 8
