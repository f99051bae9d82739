"""API keys with an expiry: made by the admin API and the CLI, listed with it, refused with
their own 401 message once it has passed (by the database's clock)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from tests.integration.auth_support import ADMIN, auth_api, make_tenant  # noqa: F401 - fixture

pytestmark = pytest.mark.integration


def _expire_now(pool: Any, key_id: str) -> None:
    with pool.connection() as conn:
        conn.execute(
            "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = %s",
            (key_id,),
        )


def test_a_key_works_until_its_expiry_then_gets_its_own_401(auth_api: Any, pool: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api, "exp")
    url = f"/api/admin/tenants/{tenant.tenant_id}/keys"
    made = auth_api.post(url, json={"name": "ci", "expires_in": "30d"}, headers=ADMIN)
    assert made.status_code == 201, made.text
    expires_at = datetime.fromisoformat(made.json()["expires_at"])
    assert abs(expires_at - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=1)
    headers = {"Authorization": f"Bearer {made.json()['key']}"}
    assert auth_api.get("/api/agents", headers=headers).status_code == 200

    listed = {k["id"]: k for k in auth_api.get(url, headers=ADMIN).json()["keys"]}
    assert listed[made.json()["id"]]["expires_at"] is not None
    assert listed[tenant.key_id]["expires_at"] is None  # keys without one never expire

    _expire_now(pool, made.json()["id"])
    refused = auth_api.get("/api/agents", headers=headers)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert "expired at" in refused.json()["error"]["message"]
    revoked_message = auth_api.get("/api/agents", headers={"X-API-Key": "mk_nope"}).json()
    assert "expired" not in revoked_message["error"]["message"]
    assert auth_api.get("/api/agents", headers=tenant.headers).status_code == 200
    counts = {t["tenant_id"]: t for t in auth_api.get("/api/admin/tenants", headers=ADMIN).json()[
        "tenants"
    ]}  # fmt: skip
    assert counts[tenant.tenant_id]["keys"] == 1  # the expired key is not active


def test_an_expiry_at_a_given_time_and_bad_expiries(auth_api: Any) -> None:  # noqa: F811
    tenant = make_tenant(auth_api, "exp")
    url = f"/api/admin/tenants/{tenant.tenant_id}/keys"
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    made = auth_api.post(url, json={"expires_at": when.isoformat()}, headers=ADMIN)
    assert made.status_code == 201 and datetime.fromisoformat(made.json()["expires_at"]) == when
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    for body in (
        {"expires_at": past},
        {"expires_in": "0d"},
        {"expires_in": "soon"},
        {"expires_at": "2030-01-01T00:00:00"},  # no time zone
        {"expires_at": when.isoformat(), "expires_in": "1d"},
    ):
        refused = auth_api.post(url, json=body, headers=ADMIN)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["error"]["code"] == "validation_error"
    keys = auth_api.get(url, headers=ADMIN).json()["keys"]
    assert len(keys) == 2  # nothing half-made by the refused requests


def test_cli_keys_with_an_expiry(pg_url: str, auth_api: Any) -> None:  # noqa: F811
    tenant_id = f"cli-{uuid.uuid4().hex[:8]}"
    env = {"MEMORA_DATABASE_URL": pg_url}

    def run(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env=env)

    assert run("tenants", "create", tenant_id).exit_code == 0
    made = run("keys", "create", tenant_id, "--expires-in", "12h")
    assert made.exit_code == 0, made.output
    at = run("keys", "create", tenant_id, "--expires-at", "2099-05-01T12:00:00")
    assert at.exit_code == 0, at.output
    assert run("keys", "create", tenant_id, "--expires-in", "12x").exit_code != 0
    assert run("keys", "create", tenant_id, "--expires-at", "2001-01-01").exit_code != 0
    both = run("keys", "create", tenant_id, "--expires-in", "1d", "--expires-at", "2099-01-01")
    assert both.exit_code != 0
    keys = json.loads(run("keys", "list", "--tenant", tenant_id, "--json").stdout)
    expiries = sorted(datetime.fromisoformat(k["expires_at"]) for k in keys)
    assert len(keys) == 2 and expiries[1] == datetime(2099, 5, 1, 12, tzinfo=UTC)
    assert abs(expiries[0] - (datetime.now(UTC) + timedelta(hours=12))) < timedelta(minutes=1)
    key = made.stdout.strip().splitlines()[-1]
    assert auth_api.get("/api/agents", headers={"X-API-Key": key}).status_code == 200
    assert run("tenants", "delete", tenant_id, "--yes").exit_code == 0
