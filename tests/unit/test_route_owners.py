"""One path, one handler, in the deployed topology: the write API (the README's port, where
`memora serve`, docker compose and the Kubernetes Ingress send requests) serves a path itself
or forwards it to the query service (`services.api.proxy.forwarded`, ahead of its routing),
never both, and what it forwards is served there once (issue 25: `GET
/api/agents/{agent_id}/memories/{memory_id}` had an answer on each side). The apps are built,
not started: their routing tables are what is checked."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.routing import BaseRoute, Match, Route

from memora.basics.config import Settings

MEMORY = "/api/agents/alice/memories/6f1c1b0e-5a0e-4a43-9f39-1d0c2f1f6d11"
SAMPLE = "6f1c1b0e-5a0e-4a43-9f39-1d0c2f1f6d11"  # fills any path parameter


class _NoBackend:
    def enqueue(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the apps are only built")


@pytest.fixture(scope="module")
def apps() -> dict[str, FastAPI]:
    from services.api import app as write_app
    from services.api import query_app

    settings = Settings(database_url="postgresql://unused", query_url="http://127.0.0.1:9")
    return {
        "api": write_app.create_app(settings, backend=_NoBackend()),
        "query": query_app.create_app(settings, backend=_NoBackend()),
    }


def _full(route: BaseRoute, method: str, path: str) -> bool:
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    return route.matches(scope)[0] is Match.FULL


def _leaves(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of included routers too (FastAPI keeps an included router whole, as
    one entry of `app.routes`, since 0.16x; earlier versions copy its routes in)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _leaves(included.routes)
        else:
            yield route


def _handlers(app: FastAPI, method: str, path: str) -> list[BaseRoute]:
    """The app's routes that answer `method path`, in the order the router tries them."""
    return [r for r in _leaves(app.routes) if _full(r, method, path)]


def _name(route: BaseRoute) -> str:
    """The handler's name: its endpoint function's, or the class of a mounted app."""
    endpoint = route.endpoint if isinstance(route, Route) else getattr(route, "app", route)
    return str(getattr(endpoint, "__name__", type(endpoint).__name__))


def _forwarding(method: str, path: str) -> bool:
    from services.api.proxy import forwarded

    return forwarded(method, path) is not None


def test_one_handler_serves_a_memory_in_full(apps: dict[str, FastAPI]) -> None:
    found = [
        (name, _name(route))
        for name, app in apps.items()
        for route in _handlers(app, "GET", MEMORY)
    ]
    assert found == [("api", "get_memory")]
    assert not _forwarding("GET", MEMORY)
    # its restore, the lifecycle's operation beside it, stays on the query service
    restore = f"{MEMORY}/restore"
    assert _forwarding("POST", restore) and not _handlers(apps["api"], "POST", restore)
    # and so does its edit (a new version: it embeds), on the same path as the view
    assert _forwarding("PATCH", MEMORY)
    assert [_name(r) for r in _handlers(apps["query"], "PATCH", MEMORY)] == ["edit_route"]
    assert len(_handlers(apps["query"], "POST", restore)) == 1


def test_every_forwarded_path_is_the_query_services_alone(apps: dict[str, FastAPI]) -> None:
    from services.api.proxy import LIFECYCLE_PATHS, READ_PATHS

    pairs = [("POST", f"/api/{p}") for p in READ_PATHS]
    pairs += [(method, f"/api{p}") for method, p in LIFECYCLE_PATHS]
    for method, template in pairs:
        path = re.sub(r"\{[^}]+\}", SAMPLE, template)
        assert _forwarding(method, path), f"{method} {path}"
        assert not _handlers(apps["api"], method, path), (
            f"{method} {path}: the write API has a route the forwarding hides"
        )
        assert len(_handlers(apps["query"], method, path)) == 1, f"{method} {path}"


def test_the_trash_is_the_write_apis_with_the_document_routes(apps: dict[str, FastAPI]) -> None:
    # a document id may hold slashes, and may end in "restore"
    document = "/api/agents/alice/documents/notes/may 1"
    assert [_name(r) for r in _handlers(apps["api"], "POST", f"{document}/restore")] == [
        "restore_document"
    ]
    assert [_name(r) for r in _handlers(apps["api"], "DELETE", document)] == ["delete_document"]
    assert [_name(r) for r in _handlers(apps["api"], "GET", f"{document}/restore")] == [
        "get_document"
    ]
    for method, path in (("POST", f"{document}/restore"), ("DELETE", document)):
        assert _handlers(apps["query"], method, path) == [], f"{method} {path}"
