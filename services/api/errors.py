"""Errors as JSON: {"error": {"code", "message", "details"}}, with the right 4xx/5xx status."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class APIError(Exception):
    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return {"error": body}


def _json_safe(errors: list[Any]) -> list[dict[str, Any]]:
    return [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")}
        for e in errors
    ]


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message, exc.details), status_code=exc.status)

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

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(psycopg.OperationalError)
    async def _db_down(_: Request, exc: psycopg.OperationalError) -> JSONResponse:
        return JSONResponse(
            error_body("database_unavailable", "the database is unavailable; retry later"),
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(psycopg.errors.QueryCanceled)
    async def _timeout(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body("timeout", "the query took too long"), status_code=503)


class BodySizeLimit:
    """Rejects bodies over `max_bytes` with 413, whether or not Content-Length is sent."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        too_large = False

        async def limited() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        response = JSONResponse(
            error_body("payload_too_large", f"request body exceeds {self.max_bytes} bytes"),
            status_code=413,
        )
        await response({"type": "http"}, _empty_receive, send)


class _TooLarge(Exception):
    pass


async def _empty_receive() -> Message:
    return {"type": "http.disconnect"}
