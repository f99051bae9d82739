"""FastAPI dependencies, declared once as Annotated aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from psycopg import Connection

from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.retrieval import Retriever
from memora.retrieval.arms.keyword import KeywordIndex
from services.api.auth import Principal, authenticate, unauthorized
from services.api.errors import APIError


def _system_connection(request: Request) -> Iterator[Connection[Any]]:
    with request.app.state.pool.connection() as conn:
        yield conn


def _state(name: str) -> Any:
    """A dependency on what the app built once at start (`app.state.<name>`). Async: FastAPI
    runs plain functions in its thread pool, a hop on every request that this does not need."""

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, name)

    return dependency


# Declared for OpenAPI (either one carries the key); read by `_principal`.
_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <API key>`")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="the API key")


async def _principal(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> Principal:
    if bearer is None and request.headers.get("authorization"):
        raise unauthorized("the Authorization header must be `Bearer <API key>`")
    key = bearer.credentials if bearer is not None else api_key
    settings = request.app.state.settings
    if not key and not settings.auth_required and not settings.rate_limit.strip():
        return authenticate(request, key)  # no key to look up, nothing to count: no I/O
    return await run_in_threadpool(authenticate, request, key)


def _tenant_connection(
    request: Request, principal: Annotated[Principal, Depends(_principal)]
) -> Iterator[Connection[Any]]:
    with request.app.state.pool.tenant_connection(principal.scope.tenant_id) as conn:
        yield conn


def _read_connection(
    request: Request, response: Response, principal: Annotated[Principal, Depends(_principal)]
) -> Iterator[Connection[Any]]:
    """On the read replica while it serves (memora.db.replica), else the primary; said in
    `X-Memora-Read-Source` as the query service's reads do."""
    chosen = request.app.state.read_routing.choose(principal.scope.tenant_id)
    if chosen.reason != "no_replica":
        response.headers["X-Memora-Read-Source"] = chosen.source
    with chosen.pool.tenant_connection(principal.scope.tenant_id) as conn:
        yield conn


# async: FastAPI runs plain functions in its thread pool, a hop these do not need
async def _scope(principal: Annotated[Principal, Depends(_principal)]) -> Scope:
    return principal.scope


async def _admin(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
    if not principal.is_admin:
        raise APIError(403, "forbidden", "this route needs an admin API key")
    return principal


# The application context every use case takes first: the settings, the pool, the task
# backend, the LLM (made on first use: 503 `llm_not_configured` without one) and the models
# (the query service's embedder).
ContextDep = Annotated[AppContext, Depends(_state("context"))]
# A connection confined by row-level security to the caller's tenant (authenticated).
ConnDep = Annotated[Connection[Any], Depends(_tenant_connection)]
# The same on the read replica when one serves (the graph reads: no read-your-writes there).
ReadConnDep = Annotated[Connection[Any], Depends(_read_connection)]
# A connection across tenants: admin routes only.
SystemConnDep = Annotated[Connection[Any], Depends(_system_connection)]
# The write API's: the graph page's keyword index (its term statistics cached).
KeywordIndexDep = Annotated[KeywordIndex, Depends(_state("keyword_index"))]
# The query service's: the read path.
RetrieverDep = Annotated[Retriever, Depends(_state("retriever"))]
# The caller's tenant (authenticated and rate-limited): pass it to every data-layer call.
# Routes that take it declare AUTH_ERRORS (401, 429) in their OpenAPI responses.
ScopeDep = Annotated[Scope, Depends(_scope)]
PrincipalDep = Annotated[Principal, Depends(_principal)]
AdminDep = Annotated[Principal, Depends(_admin)]  # 403 for keys that are not admin keys
# Paging offset; bounded so that it always fits PostgreSQL's bigint OFFSET.
Offset = Annotated[int, Query(ge=0, le=1_000_000_000)]

# Backfills (`memora backfill`) send "backfill": the pipeline then runs on the low-priority
# `<stage>.backfill` queues, so live traffic keeps flowing.
Priority = Annotated[
    Literal["live", "backfill"],
    Header(alias="X-Memora-Priority", description="`backfill`: process on the backfill queues"),
]


def actor_of(principal: Principal) -> str:
    """Who the lifecycle history records: the API key, when one was used."""
    return f"api:{principal.key_id}" if principal.key_id else "api"
