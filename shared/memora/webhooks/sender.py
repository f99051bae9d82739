"""One delivery attempt over HTTP: to the address the guard checked, never following a
redirect, within a time limit, reading at most a short excerpt of the answer."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from memora.webhooks.guard import UnsafeTarget, resolve, split

EXCERPT_CHARS = 500
MAX_READ_BYTES = 64 * 1024


@dataclass(frozen=True)
class Attempt:
    status_code: int | None = None  # None: no answer (refused target, timeout, network)
    response: str | None = None  # the start of the answer's body
    error: str | None = None  # why it failed, when it did
    retry: bool = True  # whether another attempt could succeed

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _pinned(url: str, address: str) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
    """The URL with its host replaced by the checked address, the Host header and the TLS
    server name that keep the request what it was."""
    scheme, host, port = split(url)
    default = 443 if scheme == "https" else 80
    target = httpx.URL(url).copy_with(host=address, port=port)
    host_header = host if port == default else f"{host}:{port}"
    if ":" in host:  # IPv6 literal
        host_header = f"[{host}]" if port == default else f"[{host}]:{port}"
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    return target, {"host": host_header}, extensions


def send(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    allow_private: bool,
    connect_timeout: float,
    total_timeout: float,
) -> Attempt:
    try:
        address = resolve(url, allow_private=allow_private)
    except UnsafeTarget as exc:
        return Attempt(error=f"refused: {exc}", retry=False)
    target, host_header, extensions = _pinned(url, str(address))
    deadline = time.monotonic() + total_timeout
    timeout = httpx.Timeout(total_timeout, connect=connect_timeout)
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client,
            client.stream(
                "POST", target, content=body, headers=headers | host_header, extensions=extensions
            ) as response,
        ):
            received = b""
            for chunk in response.iter_bytes():
                received += chunk
                if len(received) >= MAX_READ_BYTES or time.monotonic() > deadline:
                    break
    except httpx.HTTPError as exc:
        return Attempt(error=f"{type(exc).__name__}: {exc}"[:EXCERPT_CHARS])
    text = received.decode("utf-8", "replace")[:EXCERPT_CHARS]
    attempt = Attempt(status_code=response.status_code, response=text)
    if response.is_redirect:
        location = response.headers.get("location", "")
        return Attempt(response.status_code, text, f"redirect to {location!r} not followed")
    if not attempt.succeeded:
        return Attempt(response.status_code, text, f"HTTP {response.status_code}")
    return attempt
