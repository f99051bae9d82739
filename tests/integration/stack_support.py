"""The deployed topology in-process: the query service and the write API (forwarding to it, as
under `memora serve`, docker compose and Kubernetes), each under a real uvicorn server on a
free port of 127.0.0.1, on the suite's PostgreSQL with the pipeline run inline. Clients call
the write API's port, the README's, for everything."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from memora.basics.config import Settings
from memora.infra.embedded import free_port
from memora.pipeline.backend import InlineBackend
from tests.conftest import wait_until


def serve(app: Any) -> tuple[str, uvicorn.Server, threading.Thread]:
    """`app` under uvicorn in a thread, started: its URL, server and thread."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=60)
    return f"http://127.0.0.1:{port}", server, thread


@dataclass(frozen=True)
class Topology:
    url: str  # the write API's: the one clients call
    query_url: str
    query: FastAPI  # the query service's app, started (its state: retriever, memories…)


@contextmanager
def topology(
    settings: Settings, pool: Any, pipeline: Any, *, query_inline: bool = False
) -> Iterator[Topology]:
    """The query service and the write API forwarding to it, both serving until the end; the
    write API's work inline, and with `query_inline` the query service's too (think's
    opinions)."""
    from services.api import app as write_app
    from services.api import query_app

    backend = InlineBackend(pipeline)
    query = query_app.create_app(settings, pool=pool, backend=backend if query_inline else None)
    query_url, query_server, query_thread = serve(query)
    write = write_app.create_app(
        settings.model_copy(update={"query_url": query_url}), pool=pool, backend=backend
    )
    url, server, thread = serve(write)
    try:
        yield Topology(url, query_url, query)
    finally:
        for s, t in ((server, thread), (query_server, query_thread)):
            s.should_exit = True
            t.join(10)


def stack(settings: Settings, pool: Any, pipeline: Any) -> Iterator[str]:
    """`topology` for a fixture: yields the write API's URL."""
    with topology(settings, pool, pipeline) as t:
        yield t.url


class Client(httpx.Client):
    """A client of the README's port in a `topology`; `app`: the query service's app."""

    def __init__(self, t: Topology) -> None:
        super().__init__(base_url=t.url, timeout=120)
        self.app = t.query


@contextmanager
def process_stack(
    settings: Settings, name: str, redis_db: int, log_dir: Path, **updates: Any
) -> Iterator[Any]:
    """The whole stack as `memora serve` runs it (API, query service, a worker per stage; no
    beat), as processes on free ports with a Redis database of its own; yielded once ready.
    `updates` are settings; `env` among them is extra environment for the processes."""
    from services.cli.stack import Stack

    env: dict[str, str] = updates.pop("env", {})
    s = settings.model_copy(
        update={
            "broker_url": f"{settings.broker.rsplit('/', 1)[0]}/{redis_db}",
            "data_dir": settings.data_dir / name,
            "port": free_port(),
            "query_port": free_port(),
            **updates,
        }
    )
    stack = Stack(s, with_beat=False, log_dir=log_dir, extra_env=env)
    try:
        stack.start()
        stack.wait_ready()
        yield stack
    finally:
        stack.stop()


SERVED_ADMIN_KEY = "ui-admin-key-0123456789"


@contextmanager
def served_stack(settings: Settings, redis_url: str, data_dir: Path, llm_url: str) -> Iterator[Any]:
    """`process_stack` as a user meets it, shared by the first hour's tests and the browser's
    (tests/integration/conftest.py, `served`): the LLM extractor on the fake LLM server at
    `llm_url` (each test scripts its answers; retries and timeouts short), an admin key
    (SERVED_ADMIN_KEY), webhooks to 127.0.0.1 allowed (the tests' receivers); Redis database 5,
    logs in `data_dir`/served-logs."""
    from pydantic import SecretStr

    from tests.integration.test_llm_extraction import WORKER_LLM_ENV

    env = WORKER_LLM_ENV | {
        "MEMORA_LLM_BASE_URL": llm_url,
        "MEMORA_ADMIN_KEY": SERVED_ADMIN_KEY,
        "MEMORA_WEBHOOK_ALLOW_PRIVATE": "true",
    }
    s = settings.model_copy(update={"broker_url": redis_url, "data_dir": data_dir})
    with process_stack(
        s,
        "served",
        5,
        data_dir / "served-logs",
        llm_base_url=llm_url,
        admin_key=SecretStr(SERVED_ADMIN_KEY),
        env=env,
    ) as stack:
        yield stack
