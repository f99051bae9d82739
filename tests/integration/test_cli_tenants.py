"""`memora tenants …` and `memora keys …` against the suite's database, checked through the API."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from tests.integration.auth_support import auth_api  # noqa: F401 - fixture

pytestmark = pytest.mark.integration


def _run(pg_url: str, *args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env={"MEMORA_DATABASE_URL": pg_url})
    return result


def test_tenants_and_keys_from_the_command_line(pg_url: str, auth_api: Any) -> None:  # noqa: F811
    tenant_id = f"cli-{uuid.uuid4().hex[:8]}"
    assert _run(pg_url, "tenants", "create", tenant_id, "--name", "CLI tenant").exit_code == 0
    assert _run(pg_url, "tenants", "create", tenant_id).exit_code == 1  # exists
    assert _run(pg_url, "tenants", "create", "bad/id").exit_code != 0
    listed = json.loads(_run(pg_url, "tenants", "list", "--json").stdout)
    mine = next(t for t in listed if t["tenant_id"] == tenant_id)
    assert mine["name"] == "CLI tenant" and mine["keys"] == 0

    created = _run(pg_url, "keys", "create", tenant_id, "--name", "ops")
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("mk_") and len(key) > 40
    headers = {"Authorization": f"Bearer {key}"}
    body = {"agent_id": "bob", "items": [{"content": "Bob lives in Porto."}]}
    assert auth_api.post("/api/memories/batch", json=body, headers=headers).status_code == 200

    keys = json.loads(_run(pg_url, "keys", "list", "--tenant", tenant_id, "--json").stdout)
    assert len(keys) == 1 and keys[0]["name"] == "ops" and keys[0]["revoked_at"] is None
    assert key not in json.dumps(keys)  # neither the key nor its hash is listed
    assert _run(pg_url, "keys", "revoke", keys[0]["id"]).exit_code == 0
    assert auth_api.get("/api/agents", headers=headers).status_code == 401
    assert _run(pg_url, "keys", "revoke", str(uuid.uuid4())).exit_code == 1
    assert _run(pg_url, "keys", "create", "no-such-tenant").exit_code == 1

    deleted = _run(pg_url, "tenants", "delete", tenant_id, "--yes")
    assert deleted.exit_code == 0 and "memory_units 1" in deleted.output
    listed = json.loads(_run(pg_url, "tenants", "list", "--json").stdout)
    assert tenant_id not in {t["tenant_id"] for t in listed}
    # without --yes it asks, and "no" deletes nothing
    assert _run(pg_url, "tenants", "create", tenant_id).exit_code == 0
    refused = CliRunner().invoke(
        app, ["tenants", "delete", tenant_id], input="n\n", env={"MEMORA_DATABASE_URL": pg_url}
    )
    assert refused.exit_code == 1
    listed = json.loads(_run(pg_url, "tenants", "list", "--json").stdout)
    assert tenant_id in {t["tenant_id"] for t in listed}


class _WithKey:
    """The test client sending a key, as `services.cli.backfill.posting.connect(..., api_key)`
    does."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.headers = client, {"Authorization": f"Bearer {key}"}

    def post(self, url: str, **kwargs: Any) -> Any:
        headers = {**kwargs.pop("headers", {}), **self.headers}
        return self.client.post(url, headers=headers, **kwargs)

    def get(self, url: str, **kwargs: Any) -> Any:
        return self.client.get(url, **kwargs, headers=self.headers)

    def request(self, method: str, url: str, **kwargs: Any) -> Any:  # memora_client's call
        headers = {**(kwargs.pop("headers", None) or {}), **self.headers}
        return self.client.request(method, url, headers=headers, **kwargs)


def test_backfill_sends_its_key_and_stops_at_a_refused_one(
    auth_api: Any,  # noqa: F811
    pool: Any,
    tmp_path: Any,
) -> None:
    from services.cli.backfill.options import BackfillError, BackfillOptions
    from services.cli.backfill.posting import connect
    from services.cli.backfill.run import Backfill
    from tests.integration.auth_support import make_tenant

    assert connect("http://x", 1.0, "mk_abc").headers["authorization"] == "Bearer mk_abc"
    tenant = make_tenant(auth_api)
    archive = tmp_path / "a.jsonl"
    lines = [
        {"conversation_id": f"c{i}", "agent_id": "ann", "text": "Ann hikes."} for i in range(5)
    ]
    archive.write_text("".join(json.dumps(line) + "\n" for line in lines))

    def options(name: str) -> BackfillOptions:
        return BackfillOptions(
            path=archive, api_url="http://testserver", checkpoint=tmp_path / name, progress=False
        )

    with pytest.raises(BackfillError, match="401"):
        Backfill(options("bad.json"), _WithKey(auth_api, "mk_wrong")).run()  # type: ignore[arg-type]
    assert not (tmp_path / "bad.json.failures.jsonl").exists()  # no document counted as failed

    summary = Backfill(options("ok.json"), _WithKey(auth_api, tenant.key)).run()  # type: ignore[arg-type]
    assert summary.outcomes == {"created": 5}
    with pool.connection() as conn:
        stored = conn.execute(
            "SELECT count(*) AS n FROM documents WHERE agent_id = %s", (tenant.key_of("ann"),)
        ).fetchone()
    assert stored["n"] == 5
