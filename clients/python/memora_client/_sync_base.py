"""The synchronous client's connection: its httpx client, its retries, error answers raised as
exceptions, and the streamed transfers (export, import) (the API's methods: _sync.py).

Edit the sync files (_sync.py, _sync_base.py), then run
clients/python/scripts/generate_async.py: it writes the async ones."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import tenacity

from memora_client import _calls as c
from memora_client import _transfers as t
from memora_client import models as m
from memora_client._retries import RetryPolicy
from memora_client.errors import MemoraConnectionError, error_from

T = TypeVar("T")


class MemoraClientBase:
    """The connection `MemoraClient` sends its calls through (its arguments: its docstring)."""

    def __init__(
        self,
        base_url: str = "http://localhost:8080",
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 30.0,
        *,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.retry = RetryPolicy(max_retries, backoff, max_backoff)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            headers=c.headers(api_key, headers),
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections (not those of an `http_client` given to the constructor)."""
        if self._owns_http:
            self._http.close()

    def _send(self, call: c.Call[Any]) -> httpx.Response:
        try:
            response = self._http.request(
                call.method, call.path, json=call.json, params=call.params, headers=call.headers
            )
        except httpx.TransportError as exc:
            raise MemoraConnectionError(f"{call.method} {call.path}: {exc!r}") from exc
        if response.is_error:
            raise error_from(response)
        return response

    def _request(self, call: c.Call[T]) -> T:
        retrying = tenacity.Retrying(**self.retry.options())
        response: httpx.Response = retrying(self._send, call)
        return call.parse(response)

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Any route, e.g. `request("GET", "/api/queues")`: its JSON answer, untyped (errors
        and retries as for every method)."""
        return self._request(c.raw(method, path, json, params))

    # ------------------------------------------------------------------ export and import
    def export_agent(self, agent_id: str | None, destination: str | PathLike[str]) -> int:
        """Streams the export (NDJSON) of `agent_id`, or of every agent of the key's tenant
        when None, into the file `destination`; returns the bytes written. The file is
        complete when its last line is the `end` record (`import_file` checks)."""
        path = t.export_path(agent_id)
        written = 0
        try:
            with self._http.stream("GET", path) as response:
                if response.is_error:
                    response.read()
                    raise error_from(response)
                with open(destination, "wb") as out:
                    for chunk in response.iter_bytes():
                        written += out.write(chunk)
        except httpx.TransportError as exc:
            raise MemoraConnectionError(f"GET {path}: {exc!r}") from exc
        return written

    def import_file(self, source: str | PathLike[str]) -> m.ImportResult:
        """Imports an export file (streamed, never held in memory) into the key's tenant: all
        of it or, on an error naming the line, nothing. Importing it again changes nothing."""
        try:
            response = self._http.post(
                t.IMPORT_PATH,
                content=t.file_chunks(source),
                headers={"Content-Type": t.NDJSON},
            )
        except httpx.TransportError as exc:
            raise MemoraConnectionError(f"POST {t.IMPORT_PATH}: {exc!r}") from exc
        if response.is_error:
            raise error_from(response)
        return m.ImportResult.model_validate(response.json())
