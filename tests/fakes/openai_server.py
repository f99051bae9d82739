"""A small OpenAI-compatible HTTP server for tests: real sockets, scripted answers.

    server = FakeOpenAI().start()              # 127.0.0.1, random port
    server.script(Reply({"facts": []}), when="extract memories")   # consumed in order
    server.script(Fail(429), Fail(500), Reply("fine"))             # any request
    server.always(Reply("default answer"))                         # never consumed
    ... server.requests[-1].messages, server.requests_matching("QUESTION:")

A request is answered by the first rule whose `when` text appears in one of its messages and
that still has answers left (scripted rules before `always` ones); otherwise by `default`.
Answers: `Reply(content, delay=…)` (a dict or list content is sent as JSON text), `Fail(status)`
(429 carries Retry-After: 0), or a callable taking the `Recorded` request and returning either.
`Reply(..., delay=5)` with a short client timeout makes the client time out.

Embeddings, for the models of `embedding_models` (name -> dimension; another name answers 404
as OpenAI and Ollama do): OpenAI's `POST /v1/embeddings` and Ollama's `POST /api/embed` (batch),
`POST /api/embeddings` (one prompt; `ollama_batch_route = False` makes the server an older one
without /api/embed) and `GET /api/tags`. A vector is the normalised sum of one pseudo-random
vector per word (seeded by the word), so texts sharing words are near. `fail_embeddings(Fail(503))`
answers the next embedding requests with failures. `root_url` is Ollama's base URL.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Reply:
    content: str | dict[str, Any] | list[Any]
    delay: float = 0.0
    finish_reason: str = "stop"

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else json.dumps(self.content)


@dataclass(frozen=True)
class Fail:
    status: int
    message: str = "scripted failure"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.messages)

    def content_of(self, role: str) -> str:
        return "\n".join(
            str(m.get("content") or "") for m in self.messages if m.get("role") == role
        )


Answer = Reply | Fail
Responder = Answer | Callable[[Recorded], Answer]


@dataclass
class _Rule:
    when: str | None
    answers: deque[Responder]
    persistent: bool = False

    def matches(self, request: Recorded) -> bool:
        if not self.answers:
            return False
        return self.when is None or any(
            self.when in str(m.get("content") or "") for m in request.messages
        )


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.default: Responder = Reply("This is the fake model's answer.")
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.embedding_models: dict[str, int] = dict(EMBEDDING_MODELS)
        self.ollama_batch_route = True
        self.list_models = True  # False: GET /v1/models and /api/tags answer 404
        self._embedding_failures: deque[Fail] = deque()

    def fail_embeddings(self, *failures: Fail) -> FakeOpenAI:
        with self._lock:
            self._embedding_failures.extend(failures)
        return self

    def embedding_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if "embed" in r.path]

    # ------------------------------------------------------------------ scripting
    def script(self, *answers: Responder, when: str | None = None) -> FakeOpenAI:
        with self._lock:
            self._rules.append(_Rule(when, deque(answers)))
        return self

    def always(self, answer: Responder, when: str | None = None) -> FakeOpenAI:
        with self._lock:
            self._rules.append(_Rule(when, deque([answer]), persistent=True))
        return self

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self.requests.clear()
            self.default = Reply("This is the fake model's answer.")
            self.embedding_models = dict(EMBEDDING_MODELS)
            self.ollama_batch_route = True
            self.list_models = True
            self._embedding_failures.clear()

    def requests_matching(self, text: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if text in r.prompt]

    def pending(self) -> int:
        """Scripted answers not used yet."""
        with self._lock:
            return sum(len(r.answers) for r in self._rules if not r.persistent)

    def _answer(self, request: Recorded) -> Answer:
        with self._lock:
            self.requests.append(request)
            ordered = [r for r in self._rules if not r.persistent] + [
                r for r in self._rules if r.persistent
            ]
            responder: Responder = self.default
            for rule in ordered:
                if rule.matches(request):
                    responder = rule.answers[0] if rule.persistent else rule.answers.popleft()
                    break
        return responder(request) if callable(responder) else responder

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def _embedding(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """Status and JSON body of an embedding request (OpenAI's or Ollama's)."""
        ollama = path.startswith("/api/")
        with self._lock:
            self.requests.append(Recorded(path, headers, body))
            failure = self._embedding_failures.popleft() if self._embedding_failures else None
        model = str(body.get("model"))
        if failure is not None:
            return failure.status, {"error": {"message": failure.message, "code": failure.status}}
        if model not in self.embedding_models:
            if ollama:
                return 404, {"error": f'model "{model}" not found, try pulling it first'}
            message = f"The model `{model}` does not exist or you do not have access to it."
            error = {"message": message, "type": "invalid_request_error", "code": "model_not_found"}
            return 404, {"error": error}
        dim = self.embedding_models[model]
        if path == "/api/embeddings":
            return 200, {"embedding": fake_vector(str(body.get("prompt", "")), dim)}
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        vectors = [fake_vector(str(t), dim) for t in texts]
        if ollama:
            return 200, {"model": model, "embeddings": vectors}
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        tokens = sum(len(str(t).split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": model, "usage": usage}

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(
                self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _send_text(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                names = ["fake-model", *fake.embedding_models]
                if self.path.rstrip("/").endswith("/models") and fake.list_models:
                    data = [{"id": name, "object": "model"} for name in names]
                    self._send(200, {"object": "list", "data": data})
                elif self.path == "/api/tags" and fake.list_models:
                    tags = [{"name": f"{n}:latest", "model": f"{n}:latest"} for n in names]
                    self._send(200, {"models": tags})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                route = self.path.rstrip("/")
                if route.endswith("/embeddings") or route == "/api/embed":
                    if route == "/api/embed" and not fake.ollama_batch_route:
                        self._send_text(404, "404 page not found")  # Go's, as Ollama's router
                        return
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    self._send(*fake._embedding(route, headers, json.loads(raw or b"{}")))
                    return
                if not route.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "invalid JSON body"}})
                    return
                request = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                answer = fake._answer(request)
                if answer.delay:
                    time.sleep(answer.delay)
                if isinstance(answer, Fail):
                    headers = dict(answer.headers)
                    if answer.status == 429:
                        headers.setdefault("Retry-After", "0")
                    error = {"message": answer.message, "type": "fake_error", "code": answer.status}
                    self._send(answer.status, {"error": error}, headers)
                    return
                content = answer.text()
                prompt_tokens = max(1, len(request.prompt) // 4)
                completion_tokens = max(1, len(content) // 4)
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-fake-{next(fake._ids)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": answer.finish_reason,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    },
                )

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


EMBEDDING_MODELS = {"fake-embed": 384, "fake-embed-768": 768}
_WORD = re.compile(r"\w+")


def fake_vector(text: str, dim: int) -> list[float]:
    """The normalised sum of one pseudo-random vector per word of `text` (seeded by the word):
    deterministic, and texts that share words are near."""
    total = np.zeros(dim)
    for word in _WORD.findall(text.lower()) or [text]:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        total += np.random.default_rng(seed).standard_normal(dim)
    norm = float(np.linalg.norm(total)) or 1.0
    return [float(x) for x in total / norm]
