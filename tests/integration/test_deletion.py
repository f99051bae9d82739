"""Hard deletes of a document, an agent, all of a tenant's agents and a tenant: every row goes
(counted in every table, by the ids it had), nothing of anyone else's, and deleting again
succeeds with zero counts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memora.basics.stages import Stage
from memora.basics.tenancy import Scope
from memora.pipeline.backend import InlineBackend
from memora.think import opinions
from memora.think.opinions import OpinionDraft
from tests.integration.auth_support import (  # noqa: F401 - fixture
    ADMIN,
    Tenant,
    auth_api,
    make_tenant,
    owned_ids,
    row_counts,
    touch_access,
)

pytestmark = pytest.mark.integration
CONVERSATION = [
    {
        "content": "Alice: I started working at Google in Mountain View last week!\n"
        "Bob: Congrats Alice! Google is lucky to have you.",
        "event_date": "2024-01-15T10:00:00Z",
    },
    {"content": "Alice loves hiking in Yosemite with Bob every weekend."},
]
OTHER = [{"content": "Carol moved to Berlin and joined Siemens in 2021."}]
NOTHING_LEFT = dict.fromkeys(
    (
        "agents",
        "documents",
        "operations",
        "memory_units",
        "memory_links",
        "unit_entities",
        "entities",
        "memory_access",
        "unit_sources",
        "conversation_chunks",
        "conversation_messages",
        "conversation_index_state",
        "entity_relations",
    ),
    0,
)


def _fill(api: Any, pool: Any, pipeline: Any, tenant: Tenant, agent_id: str) -> None:
    """Two documents, an opinion, and access counts: rows in every table."""
    for document_id, items in (("conv", CONVERSATION), ("other", OTHER)):
        body = {"agent_id": agent_id, "items": items, "document_id": document_id}
        response = api.post("/api/memories/batch", json=body, headers=tenant.headers)
        assert response.status_code == 200, response.text
    with pool.connection() as conn:
        op_id = opinions.record(
            conn,
            Scope(tenant.tenant_id),
            agent_id,
            [OpinionDraft(statement="Google is a good employer for Alice", confidence=0.7)],
            formed_at=datetime(2024, 2, 1, tzinfo=UTC),
            query="Google?",
            personality={},
            based_on=[],
        )
    InlineBackend(pipeline).enqueue(Stage.OPINIONS, op_id)
    assert touch_access(pool, [tenant.key_of(agent_id)]) > 0


def _deleted(body: dict[str, Any]) -> dict[str, int]:
    """The receipt's counts of the tables `row_counts` reads (webhook events apart)."""
    return {k: v for k, v in body["deleted"].items() if k != "webhook_deliveries"}


def _event(pool: Any, tenant: Tenant, agent: str) -> str:
    """A webhook delivery of an event about the agent (as an operation's completion writes)."""
    with pool.connection() as conn, conn.transaction():
        hook = conn.execute(
            "INSERT INTO webhooks (tenant_id, url, events, secret)"
            " VALUES (%s, 'https://example.com/hook', '{operation.completed}', 's') RETURNING id",
            (tenant.tenant_id,),
        ).fetchone()
        row = conn.execute(
            "INSERT INTO webhook_deliveries (webhook_id, tenant_id, event_type, event_id, payload)"
            " VALUES (%s, %s, 'operation.completed', 'msg_1', %s::jsonb) RETURNING id",
            (hook["id"], tenant.tenant_id, json.dumps({"data": {"agent_id": agent}})),
        ).fetchone()
    return str(row["id"])


def _delivery_ids(pool: Any) -> set[str]:
    with pool.connection() as conn:
        return {str(r["id"]) for r in conn.execute("SELECT id FROM webhook_deliveries")}


def _everything(pool: Any, keys: list[str]) -> tuple[dict[str, Any], dict[str, int]]:
    ids = owned_ids(pool, keys)
    counts = row_counts(pool, keys, ids)
    assert all(counts[table] > 0 for table in NOTHING_LEFT), counts  # the setup filled them all
    return ids, counts


def test_deleting_a_document_removes_its_rows_only(
    auth_api: Any,  # noqa: F811
    pool: Any,
    pipeline: Any,
) -> None:
    tenant = make_tenant(auth_api)
    _fill(auth_api, pool, pipeline, tenant, "alice")
    key = tenant.key_of("alice")
    with pool.connection() as conn:
        doc = conn.execute(
            "SELECT id FROM documents WHERE agent_id = %s AND document_id = 'conv'", (key,)
        ).fetchone()
        ids = {
            "memory_units": [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM memory_units WHERE document_pk = %s", (doc["id"],)
                )
            ],
            "operations": [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM operations WHERE document_pk = %s", (doc["id"],)
                )
            ],
            # entities only this document mentions (Google, Mountain View...)
            "entities": [
                r["id"]
                for r in conn.execute(
                    "SELECT e.id FROM entities e WHERE e.agent_id = %s AND NOT EXISTS ("
                    " SELECT 1 FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id"
                    " WHERE ue.entity_id = e.id AND u.document_pk IS DISTINCT FROM %s)",
                    (key, doc["id"]),
                )
            ],
        }
    before = row_counts(pool, [], ids)
    assert before["memory_units"] == 3 and before["memory_links"] > 0 and before["entities"] > 0
    assert before["unit_entities"] > 0 and before["memory_access"] == 3

    path = "/api/agents/alice/documents/conv"
    deleted = auth_api.delete(path, headers=tenant.headers)
    assert deleted.status_code == 200
    assert deleted.json()["deleted"]["units_deleted"] == 3
    assert deleted.json()["deleted"]["entities_deleted"] == before["entities"]
    assert deleted.json()["deleted"]["remaining"] == 0  # every table with a document_pk
    assert row_counts(pool, [], ids) == NOTHING_LEFT
    assert auth_api.get(path, headers=tenant.headers).status_code == 404
    # the rest of the agent is intact: the other document, the opinion, the agent
    left = row_counts(pool, [key], owned_ids(pool, [key]))
    assert left["agents"] == 1 and left["documents"] == 1 and left["memory_units"] == 2

    again = auth_api.delete(path, headers=tenant.headers).json()
    assert again["success"] is True and again["deleted"]["already_absent"] is True
    assert again["deleted"]["units_deleted"] == 0


def test_deleting_an_agent_removes_every_row_of_it_and_is_idempotent(
    auth_api: Any,  # noqa: F811
    pool: Any,
    pipeline: Any,
) -> None:
    tenant, other_tenant = make_tenant(auth_api), make_tenant(auth_api)
    _fill(auth_api, pool, pipeline, tenant, "alice")
    _fill(auth_api, pool, pipeline, tenant, "bob")
    _fill(auth_api, pool, pipeline, other_tenant, "alice")  # same id, other tenant
    alice = [tenant.key_of("alice")]
    ids, before = _everything(pool, alice)
    kept = [tenant.key_of("bob"), other_tenant.key_of("alice")]
    kept_before = row_counts(pool, kept, owned_ids(pool, kept))

    events = [_event(pool, tenant, "alice"), _event(pool, tenant, "bob")]

    response = auth_api.delete("/api/agents/alice", headers=tenant.headers)
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True and body["agent_id"] == "alice"
    assert _deleted(body) == before  # the counts are the rows that were there
    assert body["deleted"]["webhook_deliveries"] == 1  # the event about alice, not bob's
    assert _delivery_ids(pool) & set(events) == {events[1]}
    # the receipt: every table with an agent_id checked, nothing of alice left
    assert body["remaining"] == 0 and body["remaining_by_table"] == {}
    assert {"memory_units", "memory_vectors", "memory_search", "memory_events"} <= set(
        body["checked"]
    )
    assert row_counts(pool, alice, ids) == NOTHING_LEFT
    assert row_counts(pool, kept, owned_ids(pool, kept)) == kept_before

    again = auth_api.delete("/api/agents/alice", headers=tenant.headers)
    assert again.status_code == 200 and _deleted(again.json()) == NOTHING_LEFT
    never = auth_api.delete("/api/agents/never-existed", headers=tenant.headers)
    assert never.status_code == 200 and _deleted(never.json()) == NOTHING_LEFT
    assert never.json()["remaining"] == 0


def test_deleting_all_of_a_tenants_data_keeps_the_tenant_and_others(
    auth_api: Any,  # noqa: F811
    pool: Any,
    pipeline: Any,
) -> None:
    tenant, other_tenant = make_tenant(auth_api), make_tenant(auth_api)
    for agent in ("alice", "bob"):
        _fill(auth_api, pool, pipeline, tenant, agent)
    _fill(auth_api, pool, pipeline, other_tenant, "alice")
    mine = [tenant.key_of("alice"), tenant.key_of("bob")]
    ids, before = _everything(pool, mine)
    kept = [other_tenant.key_of("alice")]
    kept_before = row_counts(pool, kept, owned_ids(pool, kept))

    refused = auth_api.delete("/api/agents?confirm=false", headers=tenant.headers)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "confirmation_required"
    assert auth_api.delete("/api/agents", headers=tenant.headers).status_code == 422
    assert row_counts(pool, mine, ids) == before

    response = auth_api.delete("/api/agents?confirm=true", headers=tenant.headers)
    assert response.status_code == 200 and _deleted(response.json()) == before
    assert response.json()["remaining"] == 0
    assert row_counts(pool, mine, ids) == NOTHING_LEFT
    assert row_counts(pool, kept, owned_ids(pool, kept)) == kept_before
    # the tenant and its key stay
    assert auth_api.get("/api/agents", headers=tenant.headers).json()["agents"] == []
    again = auth_api.delete("/api/agents?confirm=true", headers=tenant.headers)
    assert again.status_code == 200 and _deleted(again.json()) == NOTHING_LEFT


def test_deleting_a_tenant_removes_its_data_keys_and_itself(
    auth_api: Any,  # noqa: F811
    pool: Any,
    pipeline: Any,
) -> None:
    tenant, other_tenant = make_tenant(auth_api), make_tenant(auth_api)
    _fill(auth_api, pool, pipeline, tenant, "alice")
    _fill(auth_api, pool, pipeline, other_tenant, "alice")
    mine = [tenant.key_of("alice")]
    ids, before = _everything(pool, mine)
    kept = [other_tenant.key_of("alice")]
    kept_before = row_counts(pool, kept, owned_ids(pool, kept))

    response = auth_api.delete(f"/api/admin/tenants/{tenant.tenant_id}", headers=ADMIN)
    assert response.status_code == 200
    assert _deleted(response.json()) == before | {"api_keys": 1, "tenants": 1}
    assert response.json()["remaining"] == 0 and "memory_units" in response.json()["checked"]
    assert row_counts(pool, mine, ids) == NOTHING_LEFT
    assert row_counts(pool, kept, owned_ids(pool, kept)) == kept_before
    with pool.connection() as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM tenants WHERE tenant_id = %(t)s) AS tenants, "
            "(SELECT count(*) FROM api_keys WHERE tenant_id = %(t)s) AS api_keys",
            {"t": tenant.tenant_id},
        ).fetchone()
    assert left == {"tenants": 0, "api_keys": 0}
    assert auth_api.get("/api/agents", headers=tenant.headers).status_code == 401

    again = auth_api.delete(f"/api/admin/tenants/{tenant.tenant_id}", headers=ADMIN)
    assert again.status_code == 200
    assert _deleted(again.json()) == NOTHING_LEFT | {"api_keys": 0, "tenants": 0}
