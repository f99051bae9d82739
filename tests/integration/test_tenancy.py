"""Tenants and API keys: two tenants with the same agent id never see each other's data, keys
are checked (401), admin routes need admin keys (403), and auth can be off."""

from __future__ import annotations

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
)

pytestmark = pytest.mark.integration
AGENT = "alice"  # the same agent id in every tenant


def _post(api: Any, tenant: Tenant | None, content: str, document_id: str = "doc-1") -> Any:
    response = api.post(
        "/api/memories/batch",
        json={"agent_id": AGENT, "items": [{"content": content}], "document_id": document_id},
        headers=tenant.headers if tenant else ADMIN,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _opinion(pipeline: Any, pool: Any, tenant: Tenant, statement: str) -> Any:
    with pool.connection() as conn:
        op_id = opinions.record(
            conn,
            Scope(tenant.tenant_id),
            AGENT,
            [OpinionDraft(statement=statement, confidence=0.7)],
            formed_at=datetime(2024, 3, 1, tzinfo=UTC),
            query="q",
            personality={},
            based_on=[],
        )
    InlineBackend(pipeline).enqueue(Stage.OPINIONS, op_id)
    return op_id


def test_same_agent_id_in_two_tenants_shares_nothing(
    auth_api: Any,  # noqa: F811
    pool: Any,
    pipeline: Any,
) -> None:
    a, b = make_tenant(auth_api, "acme"), make_tenant(auth_api, "globex")
    op_a = _post(auth_api, a, "Alice moved to Lisbon to work for Acme.")["operation_id"]
    op_b = _post(auth_api, b, "Alice moved to Tokyo to work for Globex.")["operation_id"]

    # documents: each tenant sees its own under the same ids
    for tenant, city in ((a, "Lisbon"), (b, "Tokyo")):
        listed = auth_api.get(f"/api/agents/{AGENT}/documents", headers=tenant.headers).json()
        assert listed["agent_id"] == AGENT and len(listed["documents"]) == 1
        doc = auth_api.get(f"/api/agents/{AGENT}/documents/doc-1", headers=tenant.headers).json()
        assert doc["agent_id"] == AGENT and city in doc["items"][0]["content"]

    # operations: visible to the owner only, with the client's agent id
    mine = auth_api.get(f"/api/operations/{op_a}", headers=a.headers)
    assert mine.status_code == 200 and mine.json()["agent_id"] == AGENT
    assert mine.json()["status"] == "completed"
    theirs = auth_api.get(f"/api/operations/{op_a}", headers=b.headers)
    assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "not_found"
    assert auth_api.get(f"/api/operations/{op_b}", headers=a.headers).status_code == 404

    # profiles and agent lists
    auth_api.put(f"/api/agents/{AGENT}", json={"background": "I am Acme's."}, headers=a.headers)
    profile_b = auth_api.get(f"/api/agents/{AGENT}/profile", headers=b.headers).json()
    assert profile_b["agent_id"] == AGENT and profile_b["background"] == ""
    for tenant in (a, b):
        listed = auth_api.get("/api/agents", headers=tenant.headers).json()["agents"]
        assert [x["agent_id"] for x in listed] == [AGENT]

    # memories: stored under each tenant's key, each with its own content
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT a.agent_id, a.tenant_id, u.text FROM agents a "
            "JOIN memory_units u ON u.agent_id = a.agent_id "
            "WHERE a.agent_id = ANY(%s) ORDER BY a.agent_id",
            ([a.key_of(AGENT), b.key_of(AGENT)],),
        ).fetchall()
    assert {(r["agent_id"], r["tenant_id"]) for r in rows} == {
        (a.key_of(AGENT), a.tenant_id),
        (b.key_of(AGENT), b.tenant_id),
    }
    texts = {r["tenant_id"]: r["text"] for r in rows}
    assert "Lisbon" in texts[a.tenant_id] and "Tokyo" in texts[b.tenant_id]

    # opinions: listed and their history found only by the owner
    _opinion(pipeline, pool, a, "Lisbon is a great city for engineers")
    current_a = auth_api.get(f"/api/agents/{AGENT}/opinions", headers=a.headers).json()
    assert [o["statement"] for o in current_a["opinions"]] == [
        "Lisbon is a great city for engineers"
    ]
    assert auth_api.get(f"/api/agents/{AGENT}/opinions", headers=b.headers).json()["opinions"] == []
    opinion_id = current_a["opinions"][0]["id"]
    history = f"/api/agents/{AGENT}/opinions/{opinion_id}/history"
    assert auth_api.get(history, headers=a.headers).status_code == 200
    assert auth_api.get(history, headers=b.headers).status_code == 404

    # the default tenant (the admin key's) has its own "alice" too, unaffected by both
    assert auth_api.get(f"/api/agents/{AGENT}/documents", headers=ADMIN).json()["documents"] == []

    # a delete by one tenant removes its document only
    gone = auth_api.delete(f"/api/agents/{AGENT}/documents/doc-1", headers=b.headers).json()
    assert gone["deleted"]["units_deleted"] == 1
    kept = auth_api.get(f"/api/agents/{AGENT}/documents/doc-1", headers=a.headers)
    assert kept.status_code == 200
    missing = auth_api.get(f"/api/agents/{AGENT}/documents/doc-1", headers=b.headers)
    assert missing.status_code == 404


def test_stored_agent_rows_must_match_their_tenant(pool: Any) -> None:
    """The database itself refuses an agent key outside its tenant's namespace."""
    import psycopg

    for key, tenant in (("x/alice", "default"), ("alice", "acme"), ("acme2/alice", "acme")):
        with pool.connection() as conn, pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO agents (agent_id, tenant_id) VALUES (%s, %s)", (key, tenant))


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer mk_not-a-real-key"},
        {"X-API-Key": "mk_not-a-real-key"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer "},
    ],
)
def test_missing_or_wrong_keys_are_401(auth_api: Any, headers: dict[str, str]) -> None:  # noqa: F811
    for method, path, body in (
        ("GET", "/api/agents", None),
        ("POST", "/api/memories/batch", {"agent_id": AGENT, "items": [{"content": "hi there"}]}),
        ("DELETE", f"/api/agents/{AGENT}", None),
        ("GET", "/api/admin/tenants", None),
    ):
        response = auth_api.request(method, path, json=body, headers=headers)
        assert response.status_code == 401, (method, path, response.text)
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"


def test_revoked_key_is_401_at_once_and_x_api_key_works(auth_api: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api)
    assert auth_api.get("/api/agents", headers={"X-API-Key": tenant.key}).status_code == 200
    revoked = auth_api.delete(f"/api/admin/keys/{tenant.key_id}", headers=ADMIN)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    again = auth_api.delete(f"/api/admin/keys/{tenant.key_id}", headers=ADMIN)
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]  # idempotent
    for headers in (tenant.headers, {"X-API-Key": tenant.key}):
        response = auth_api.get("/api/agents", headers=headers)
        assert response.status_code == 401 and "revoked" in response.json()["error"]["message"]


def test_admin_routes_need_an_admin_key(auth_api: Any, pool: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api)
    for method, path, body in (
        ("GET", "/api/admin/tenants", None),
        ("POST", "/api/admin/tenants", {"tenant_id": "sneaky"}),
        ("DELETE", f"/api/admin/tenants/{tenant.tenant_id}", None),
        ("POST", f"/api/admin/tenants/{tenant.tenant_id}/keys", {"admin": True}),
        ("GET", f"/api/admin/tenants/{tenant.tenant_id}/keys", None),
        ("DELETE", f"/api/admin/keys/{tenant.key_id}", None),
    ):
        response = auth_api.request(method, path, json=body, headers=tenant.headers)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    with pool.connection() as conn:
        assert conn.execute("SELECT 1 FROM tenants WHERE tenant_id = 'sneaky'").fetchone() is None
        key = conn.execute(
            "SELECT revoked_at FROM api_keys WHERE id = %s", (tenant.key_id,)
        ).fetchone()
    assert key == {"revoked_at": None}
    # an admin key made for a tenant manages tenants too, and works on its own tenant's data
    admin = make_tenant(auth_api, admin=True)
    listed = auth_api.get("/api/admin/tenants", headers=admin.headers)
    assert listed.status_code == 200
    ids = {t["tenant_id"] for t in listed.json()["tenants"]}
    assert {"default", tenant.tenant_id, admin.tenant_id} <= ids


def test_admin_routes_manage_tenants_and_keys(auth_api: Any, pool: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api)
    duplicate = auth_api.post(
        "/api/admin/tenants", json={"tenant_id": tenant.tenant_id}, headers=ADMIN
    )
    assert duplicate.status_code == 409 and duplicate.json()["error"]["code"] == "conflict"
    assert (
        auth_api.post(
            "/api/admin/tenants", json={"tenant_id": "default"}, headers=ADMIN
        ).status_code
        == 409
    )
    for bad in ("a/b", "", "-x", "x" * 65, "é"):
        response = auth_api.post("/api/admin/tenants", json={"tenant_id": bad}, headers=ADMIN)
        assert response.status_code == 422, bad
    unknown = auth_api.post("/api/admin/tenants/nobody-here/keys", json={}, headers=ADMIN)
    assert unknown.status_code == 404
    gone = auth_api.delete("/api/admin/keys/00000000-0000-0000-0000-000000000000", headers=ADMIN)
    assert gone.status_code == 404

    second = auth_api.post(
        f"/api/admin/tenants/{tenant.tenant_id}/keys", json={"name": "ci"}, headers=ADMIN
    ).json()
    assert second["key"].startswith("mk_") and second["key"].startswith(second["prefix"])
    keys = auth_api.get(f"/api/admin/tenants/{tenant.tenant_id}/keys", headers=ADMIN).json()
    assert {k["id"] for k in keys["keys"]} == {tenant.key_id, second["id"]}
    assert all("key" not in k and "key_hash" not in k for k in keys["keys"])
    # only the hash is stored
    with pool.connection() as conn:
        stored = conn.execute(
            "SELECT key_hash FROM api_keys WHERE id = %s", (second["id"],)
        ).fetchone()
    assert stored is not None and second["key"] not in stored["key_hash"]
    assert len(stored["key_hash"]) == 64
    listed = auth_api.get("/api/admin/tenants", headers=ADMIN).json()["tenants"]
    mine = next(t for t in listed if t["tenant_id"] == tenant.tenant_id)
    assert mine["keys"] == 2 and mine["agents"] == 0


def test_auth_off_is_the_default_tenant_and_a_key_still_selects_its_tenant(
    inline_api: Any,
    auth_api: Any,  # noqa: F811
    agent_id: str,
) -> None:
    tenant = make_tenant(auth_api)  # tenants and keys live in the database both apps share
    body = {"agent_id": agent_id, "items": [{"content": "Bob likes tea."}], "document_id": "d"}
    assert (
        inline_api.post("/api/memories/batch", json=body, headers=tenant.headers).status_code == 200
    )
    # without a key: the default tenant, which has no such document
    assert inline_api.get(f"/api/agents/{agent_id}/documents/d").status_code == 404
    assert (
        inline_api.get(f"/api/agents/{agent_id}/documents/d", headers=tenant.headers).status_code
        == 200
    )
    wrong = inline_api.get("/api/agents", headers={"Authorization": "Bearer mk_wrong"})
    assert wrong.status_code == 401
    # the admin routes need an admin key even then
    assert inline_api.get("/api/admin/tenants").status_code == 403


def test_think_reads_only_the_callers_tenant(
    auth_api: Any,  # noqa: F811
    llm_settings: Any,
    pool: Any,
    pipeline: Any,
    fake_llm: Any,
) -> None:
    from fastapi.testclient import TestClient
    from pydantic import SecretStr

    from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
    from services.api.query_app import create_app
    from tests.fakes import Reply
    from tests.integration.auth_support import ADMIN_KEY

    a, b = make_tenant(auth_api, "acme"), make_tenant(auth_api, "globex")
    _post(auth_api, a, "Alice adores Lisbon and its custard tarts.")
    _post(auth_api, b, "Alice adores Tokyo and its ramen shops.")
    auth_api.put(f"/api/agents/{AGENT}", json={"background": "I sail."}, headers=a.headers)
    auth_api.put(f"/api/agents/{AGENT}", json={"background": "I ski."}, headers=b.headers)
    fake_llm.always(Reply("Ramen, of course."), when=THINK_MARKER)
    fake_llm.always(Reply({"opinions": []}), when=OPINION_MARKER)
    update = {"auth_required": True, "admin_key": SecretStr(ADMIN_KEY)}
    app = create_app(
        llm_settings.model_copy(update=update), pool=pool, backend=InlineBackend(pipeline)
    )
    with TestClient(app) as query:
        body = {"agent_id": AGENT, "query": "Which city does Alice adore?"}
        assert query.post("/api/think", json=body).status_code == 401
        answer = query.post("/api/think", json=body, headers=b.headers)
    assert answer.status_code == 200, answer.text
    found = [e["text"] for network in answer.json()["based_on"].values() for e in network]
    assert any("Tokyo" in t for t in found) and not any("Lisbon" in t for t in found)
    [prompt] = [r for r in fake_llm.requests if THINK_MARKER in r.content_of("system")]
    assert "I ski." in prompt.content_of("user") and "I sail." not in prompt.content_of("user")
    assert "Lisbon" not in prompt.prompt


def test_search_reads_only_the_callers_tenant(
    auth_api: Any,  # noqa: F811
    settings: Any,
    pool: Any,
) -> None:
    from fastapi.testclient import TestClient
    from pydantic import SecretStr

    from services.api.query_app import create_app
    from tests.integration.auth_support import ADMIN_KEY

    a, b = make_tenant(auth_api, "acme"), make_tenant(auth_api, "globex")
    _post(auth_api, a, "Alice adores Lisbon and its custard tarts.")
    _post(auth_api, b, "Alice adores Tokyo and its ramen shops.")
    update = {"auth_required": True, "admin_key": SecretStr(ADMIN_KEY)}
    with TestClient(create_app(settings.model_copy(update=update), pool=pool)) as query:
        body = {"agent_id": AGENT, "query": "Which city does Alice adore?"}
        assert query.post("/api/search", json=body).status_code == 401
        found = query.post("/api/search", json=body, headers=b.headers)
    assert found.status_code == 200, found.text
    texts = [r["text"] for r in found.json()["results"]]
    assert any("Tokyo" in t for t in texts) and not any("Lisbon" in t for t in texts)
