"""A webhook receiver for the tests: a real HTTP server on 127.0.0.1 that records what it
gets and answers by path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    requests: list[Received] = field(default_factory=list)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1: /ok answers 204, /fail 500, /redirect 302 to /ok; every
    request is recorded."""
    found = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            found.requests.append(Received(self.path, headers, body))
            route = urlsplit(self.path).path
            if route == "/redirect":
                self.send_response(302)
                self.send_header("location", f"{found.url}/ok")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            status, answer = (500, b"receiver broke") if route == "/fail" else (204, b"")
            self.send_response(status)
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
