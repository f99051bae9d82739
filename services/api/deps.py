"""FastAPI dependencies, declared once as Annotated aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from psycopg import Connection

from memora.config import Settings
from memora.pipeline.backend import TaskBackend


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _connection(request: Request) -> Iterator[Connection[Any]]:
    with request.app.state.pool.connection() as conn:
        yield conn


def _backend(request: Request) -> TaskBackend:
    return request.app.state.backend


SettingsDep = Annotated[Settings, Depends(_settings)]
ConnDep = Annotated[Connection[Any], Depends(_connection)]
BackendDep = Annotated[TaskBackend, Depends(_backend)]
