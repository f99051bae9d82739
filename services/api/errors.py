"""Errors as JSON: {"error": {"code", "message", "details"}}, with the right 4xx/5xx status."""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memora.basics.errors import Refused
from memora.store import generations


class APIError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details
        self.headers = headers


class ErrorInfo(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    """The body of every 4xx/5xx answer: {"error": {"code", "message", "details"}}."""

    error: ErrorInfo


_ERROR_DESCRIPTIONS = {
    400: "The body is not valid JSON (`invalid_json`)",
    401: "No API key, or one that is unknown or revoked (`unauthorized`)",
    403: "The API key is not an admin key (`forbidden`)",
    404: "Not found (`not_found`)",
    409: "Conflict (`conflict`, `too_many_matches`, `conversation_index_disabled`)",
    410: "Gone: past its retention period (`retention_expired`)",
    413: "The body is too large (`payload_too_large`)",
    422: "The request failed validation (`validation_error` and route-specific codes)",
    429: "Too many requests for this API key (`rate_limited`); retry after `Retry-After` seconds",
    502: "An upstream service (the LLM) answered badly",
    503: "A dependency (the database, the LLM, the read path) is unavailable; retry later",
}
_ERROR_HEADERS = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    429: {
        "Retry-After": {
            "description": "seconds until the limit lets a request through",
            "schema": {"type": "integer", "minimum": 1},
            "required": True,
        }
    },
}
BODY_ERRORS = (400, 413, 422)
# Every route that takes an API key (services.api.deps.ScopeDep); admin routes add 403.
AUTH_ERRORS = (401, 429)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for routes that answer these statuses with the JSON error body."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        response = {"model": ErrorResponse, "description": _ERROR_DESCRIPTIONS.get(status, "Error")}
        if status in _ERROR_HEADERS:
            response["headers"] = _ERROR_HEADERS[status]
        responses[status] = response
    return responses


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return {"error": body}


def _printable(value: Any) -> Any:
    """Unpaired surrogates (from JSON escapes) cannot be encoded as UTF-8: show them escaped."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _json_safe(errors: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "loc": [_printable(part) for part in e.get("loc", ())],
            "msg": _printable(str(e.get("msg", ""))),
            "type": e.get("type", ""),
        }
        for e in errors
    ]


def _is_unstorable_text(exc: Exception) -> bool:
    """Text PostgreSQL cannot take (NUL, unpaired surrogates): the client's input, not a fault."""
    if isinstance(exc, UnicodeEncodeError):
        return exc.reason == "surrogates not allowed"
    if isinstance(exc, psycopg.errors.UntranslatableCharacter):
        return True
    return type(exc) is psycopg.DataError and "NUL (0x00)" in str(exc)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(Refused)
    async def _refused(_: Request, exc: Refused) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message, exc.details or None), exc.status)

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return answer(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _json_safe(list(exc.errors()))
        if any(e["type"] == "json_invalid" for e in errors):
            return JSONResponse(
                error_body("invalid_json", "request body is not valid JSON", errors),
                status_code=400,
            )
        return JSONResponse(
            error_body("validation_error", "request failed validation", errors), status_code=422
        )

    # Starlette's class, not FastAPI's subclass: the router (404, 405) and FastAPI's body parsing
    # (400 for a body that is not UTF-8) raise Starlette's, which a handler for the subclass
    # never sees.
    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "invalid_json", 404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "http_error"
        )
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(psycopg.OperationalError)
    async def _db_down(_: Request, exc: psycopg.OperationalError) -> JSONResponse:
        return JSONResponse(
            error_body("database_unavailable", "the database is unavailable; retry later"),
            status_code=503,
            headers={"Retry-After": "5"},
        )

    # A safety net for routes whose request models let such text through to the database.
    @app.exception_handler(UnicodeEncodeError)
    @app.exception_handler(psycopg.DataError)
    async def _unstorable(_: Request, exc: Exception) -> JSONResponse:
        if not _is_unstorable_text(exc):
            raise exc
        return JSONResponse(
            error_body(
                "invalid_text", "text must not contain NUL characters or unpaired surrogates"
            ),
            status_code=422,
        )

    for refused in (generations.GenerationChanged, psycopg.DatabaseError):
        app.add_exception_handler(refused, _model_changed)

    @app.exception_handler(psycopg.errors.QueryCanceled)
    async def _timeout(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body("timeout", "the query took too long"), status_code=503)


async def _model_changed(request: Request, exc: Exception) -> JSONResponse:
    """A write (remember, edit, reflect) whose vector a `memora reembed` switch refused
    (MG001): the process reads the live generation again, the next attempt embeds with its
    model."""
    if not generations.changed(exc):
        raise exc
    if (context := getattr(request.app.state, "context", None)) is not None:
        context.follower.expire()
    return JSONResponse(
        error_body("embedding_model_changed", "the embedding model changed; retry"),
        status_code=503,
        headers={"Retry-After": "1"},
    )


def answer(exc: APIError) -> JSONResponse:
    return JSONResponse(
        error_body(exc.code, exc.message, exc.details), status_code=exc.status, headers=exc.headers
    )


class BodySizeLimit:
    """Rejects bodies over `max_bytes` with a 413 JSON error, whether or not Content-Length is
    sent, in a way ordinary clients receive.

    Most clients (urllib, requests, httpx) send the whole body before they read the answer: a
    server that answers and closes while the body is still arriving makes the client's kernel
    see a reset, and the 413 is lost. So the rest of the body is read and discarded (up to
    `drain_bytes`) before the 413 goes out, with `Connection: close`. A client that sent
    `Expect: 100-continue` is answered at once: it has not sent the body and will not.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        drain_bytes: int = 64 * 1024 * 1024,
        per_path: dict[str, int] | None = None,
    ) -> None:
        self.app, self.max_bytes, self.drain_bytes = app, max_bytes, drain_bytes
        self.per_path = per_path or {}  # paths with a limit of their own (imports)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.per_path.get(scope["path"], self.max_bytes)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            expects_answer_first = headers.get(b"expect", b"").lower() == b"100-continue"
            # A body larger than max_bytes + drain_bytes is not read at all: closed at once.
            if not expects_answer_first and int(declared) <= max_bytes + self.drain_bytes:
                await self._drain(receive)
            await self._reject(send, max_bytes)
            return
        received = 0
        overflow: _TooLarge | None = None

        async def limited() -> Message:
            nonlocal received, overflow
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    overflow = _TooLarge(more=bool(message.get("more_body")))
                    raise overflow
            return message

        async def unless_overflowed(message: Message) -> None:
            # FastAPI turns an error while reading the body into its own 400: never sent.
            if overflow is None:
                await send(message)

        with contextlib.suppress(_TooLarge):
            await self.app(scope, limited, unless_overflowed)
        if overflow is not None:
            if overflow.more:
                await self._drain(receive)
            await self._reject(send, max_bytes)

    async def _drain(self, receive: Receive) -> None:
        """Reads and drops the rest of the body, `drain_bytes` at most."""
        drained = 0
        while drained <= self.drain_bytes:
            message = await receive()
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body"):
                return

    async def _reject(self, send: Send, max_bytes: int) -> None:
        response = JSONResponse(
            error_body("payload_too_large", f"request body exceeds {max_bytes} bytes"),
            status_code=413,
            headers={"Connection": "close"},
        )
        await response({"type": "http"}, _empty_receive, send)


class _TooLarge(Exception):
    def __init__(self, more: bool) -> None:
        super().__init__("request body too large")
        self.more = more  # whether the client is still sending


async def _empty_receive() -> Message:
    return {"type": "http.disconnect"}
