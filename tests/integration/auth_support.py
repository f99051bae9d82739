"""Fixtures and helpers for the tenancy, deletion and input-safety tests: apps with auth on,
tenants with keys, and row counts of everything an agent owns."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from memora.basics.config import Settings

ADMIN_KEY = "test-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def auth_app(settings: Settings, pool: Any, pipeline: Any, **overrides: Any) -> Any:
    """The write API with auth required, the bootstrap admin key, stages run inline. Failed
    authentications are not limited unless asked for: every test client has one address."""
    from fastapi.testclient import TestClient

    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    update = {
        "auth_required": True,
        "admin_key": SecretStr(ADMIN_KEY),
        "auth_failure_limit": "",
        **overrides,
    }
    app = create_app(settings.model_copy(update=update), pool=pool, backend=InlineBackend(pipeline))
    return TestClient(app)


@pytest.fixture(scope="module")
def auth_api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Any]:
    with auth_app(settings, pool, pipeline) as client:
        yield client


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    key: str
    key_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def key_of(self, agent_id: str) -> str:
        """The stored agent key (memora.basics.tenancy.Scope.key)."""
        return f"{self.tenant_id}/{agent_id}"


def make_tenant(api: Any, prefix: str = "t", *, admin: bool = False) -> Tenant:
    tenant_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    created = api.post("/api/admin/tenants", json={"tenant_id": tenant_id}, headers=ADMIN)
    assert created.status_code == 201, created.text
    key = api.post(f"/api/admin/tenants/{tenant_id}/keys", json={"admin": admin}, headers=ADMIN)
    assert key.status_code == 201, key.text
    return Tenant(tenant_id, key.json()["key"], key.json()["id"])


def owned_ids(pool: Any, agent_keys: list[str]) -> dict[str, list[Any]]:
    """Ids of the units, entities and operations stored under these agent keys."""
    with pool.connection() as conn:
        return {
            name: [
                r["id"]
                for r in conn.execute(
                    f"SELECT id FROM {name} WHERE agent_id = ANY(%s)", (agent_keys,)
                ).fetchall()
            ]
            for name in ("memory_units", "entities", "operations")
        }


def row_counts(pool: Any, agent_keys: list[str], ids: dict[str, list[Any]]) -> dict[str, int]:
    """Rows left of these agents, in every table; `ids` (from `owned_ids` before a delete)
    also finds rows that reference them without naming the agent."""
    units, entities, ops = ids["memory_units"], ids["entities"], ids["operations"]
    with pool.connection() as conn:
        row = conn.execute(
            """
            SELECT
              (SELECT count(*) FROM agents WHERE agent_id = ANY(%(k)s)) AS agents,
              (SELECT count(*) FROM documents WHERE agent_id = ANY(%(k)s)) AS documents,
              (SELECT count(*) FROM operations
               WHERE agent_id = ANY(%(k)s) OR id = ANY(%(o)s)) AS operations,
              (SELECT count(*) FROM memory_units
               WHERE agent_id = ANY(%(k)s) OR id = ANY(%(u)s)) AS memory_units,
              (SELECT count(*) FROM memory_links
               WHERE from_unit = ANY(%(u)s) OR to_unit = ANY(%(u)s)) AS memory_links,
              (SELECT count(*) FROM unit_entities
               WHERE unit_id = ANY(%(u)s) OR entity_id = ANY(%(e)s)) AS unit_entities,
              (SELECT count(*) FROM entities
               WHERE agent_id = ANY(%(k)s) OR id = ANY(%(e)s)) AS entities,
              (SELECT count(*) FROM memory_access WHERE unit_id = ANY(%(u)s)) AS memory_access,
              (SELECT count(*) FROM unit_sources WHERE unit_id = ANY(%(u)s)) AS unit_sources,
              (SELECT count(*) FROM conversation_chunks
               WHERE agent_id = ANY(%(k)s)) AS conversation_chunks,
              (SELECT count(*) FROM conversation_messages
               WHERE agent_id = ANY(%(k)s)) AS conversation_messages,
              (SELECT count(*) FROM conversation_index_state
               WHERE agent_id = ANY(%(k)s)) AS conversation_index_state,
              (SELECT count(*) FROM entity_relations WHERE agent_id = ANY(%(k)s)
               OR subject_id = ANY(%(e)s) OR object_id = ANY(%(e)s)) AS entity_relations
            """,
            {"k": agent_keys, "u": units, "e": entities, "o": ops},
        ).fetchone()
    return dict(row)


def touch_access(pool: Any, agent_keys: list[str]) -> int:
    """Give every unit of these agents a memory_access row, as searches would."""
    with pool.connection() as conn:
        return int(
            conn.execute(
                "INSERT INTO memory_access (unit_id, access_count) "
                "SELECT id, 3 FROM memory_units WHERE agent_id = ANY(%s) "
                "ON CONFLICT (unit_id) DO NOTHING",
                (agent_keys,),
            ).rowcount
        )
