"""Row-level security, the second line of tenant isolation (migration 0006): a raw query in a
tenant's session, without the application's own tenant filter, sees and writes only that
tenant's rows in every tenant-scoped table; the search queries keep their indexes under it;
the schema leaves no tenant-scoped table out."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memora.db.pool import SYSTEM_ROLE, TENANT_ROLE
from memora.retrieval.filters import Filters, compile_filters
from tests.integration.auth_support import (  # noqa: F401 - fixture
    Tenant,
    auth_api,
    make_tenant,
    touch_access,
)

pytestmark = pytest.mark.integration
AGENT = "alice"
# every table that holds a tenant's data (the schema test below finds any other)
TENANT_TABLES = (
    "tenants",
    "api_keys",
    "agents",
    "documents",
    "operations",
    "memory_units",
    "memory_search",
    "memory_vectors",
    "memory_links",
    "entities",
    "unit_entities",
    "memory_access",
    "conversation_messages",
    "conversation_chunks",
    "conversation_index_state",
    "unit_sources",
    "memory_events",
    "job_cursors",
    "webhooks",
    "webhook_deliveries",
)


def _ingest(api: Any, tenant: Tenant, *contents: str) -> None:
    items = [{"content": c} for c in contents]
    body = {"agent_id": AGENT, "items": items, "document_id": "d1"}
    response = api.post("/api/memories/batch", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text


def _tenants_per_table(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    """The tenants whose rows this session sees, per table, with no filter of its own."""
    return {
        table: {r["tenant_id"] for r in conn.execute(f"SELECT DISTINCT tenant_id FROM {table}")}
        for table in TENANT_TABLES
    }


@pytest.fixture(scope="module")
def two_tenants(auth_api: Any, pool: Any) -> tuple[Tenant, Tenant]:  # noqa: F811
    a, b = make_tenant(auth_api, "rls-a"), make_tenant(auth_api, "rls-b")
    _ingest(auth_api, a, "Alice met Bob in Lisbon.", "Bob told Alice about Acme's new office.")
    _ingest(auth_api, b, "Alice met Carol in Tokyo.", "Carol told Alice about Globex's merger.")
    touch_access(pool, [a.key_of(AGENT), b.key_of(AGENT)])
    for tenant in (a, b):  # an endpoint and a delivery (its ping) of each tenant's
        hook = {"url": "https://93.184.215.14/hook", "events": ["operation.failed"]}
        made = auth_api.post("/api/webhooks", json=hook, headers=tenant.headers)
        assert made.status_code == 201, made.text
        ping = auth_api.post(f"/api/webhooks/{made.json()['id']}/test", headers=tenant.headers)
        assert ping.status_code == 202, ping.text
    with pool.connection() as conn:  # the lifecycle's audit trail and a job's cursor, as
        for tenant in (a, b):  # remember and the evolution jobs would write them
            key = tenant.key_of(AGENT)
            conn.execute(
                "INSERT INTO memory_events (agent_id, unit_id, event, actor) "
                "SELECT agent_id, id, 'remembered', 'test' FROM memory_units "
                "WHERE agent_id = %s LIMIT 1",
                (key,),
            )
            conn.execute(
                "INSERT INTO job_cursors (job, agent_id, position) VALUES ('consolidate', %s, "
                "'{}') ON CONFLICT DO NOTHING",
                (key,),
            )
    return a, b


def test_a_tenant_session_sees_only_its_own_rows_in_every_table(
    two_tenants: tuple[Tenant, Tenant], pool: Any
) -> None:
    a, b = two_tenants
    with pool.connection() as conn:  # cross-tenant (memora_system): both are there
        everything = _tenants_per_table(conn)
    for table in TENANT_TABLES:
        assert {a.tenant_id, b.tenant_id} <= everything[table], table
    for me in (a, b):
        with pool.tenant_connection(me.tenant_id) as conn:
            assert conn.execute("SELECT current_user AS u").fetchone()["u"] == TENANT_ROLE
            seen = _tenants_per_table(conn)
            assert seen == {table: {me.tenant_id} for table in TENANT_TABLES}
            # the other tenant's agent, named outright, is not there
            other = b if me is a else a
            hidden = conn.execute(
                "SELECT count(*) AS n FROM memory_units WHERE agent_id = %s",
                (other.key_of(AGENT),),
            ).fetchone()
            assert hidden["n"] == 0


def test_a_tenant_session_cannot_write_or_change_another_tenants_rows(
    two_tenants: tuple[Tenant, Tenant], pool: Any
) -> None:
    a, b = two_tenants
    with pool.tenant_connection(a.tenant_id) as conn:
        changed = conn.execute(
            "UPDATE agents SET background = 'hacked' WHERE agent_id = %s", (b.key_of(AGENT),)
        )
        assert changed.rowcount == 0
        gone = conn.execute("DELETE FROM memory_units WHERE agent_id = %s", (b.key_of(AGENT),))
        assert gone.rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO agents (agent_id, tenant_id) VALUES (%s, %s)",
                (f"{b.tenant_id}/mallory", b.tenant_id),
            )
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(  # a row of b's namespace, wherever it claims to belong
                "INSERT INTO documents (agent_id, document_id, content_hash, items, item_count) "
                "VALUES (%s, 'x', 'h', '[]', 0)",
                (b.key_of(AGENT),),
            )
        conn.rollback()
        # a rollback does not undo the switch: still confined afterwards
        assert conn.execute("SELECT current_user AS u").fetchone()["u"] == TENANT_ROLE
        assert _tenants_per_table(conn)["agents"] == {a.tenant_id}
    with pool.connection() as conn:  # returned and lent again: cross-tenant once more
        assert conn.execute("SELECT current_user AS u").fetchone()["u"] == SYSTEM_ROLE
        row = conn.execute(
            "SELECT background FROM agents WHERE agent_id = %s", (b.key_of(AGENT),)
        ).fetchone()
        assert row["background"] != "hacked"


def test_without_a_tenant_setting_the_tenant_role_sees_nothing(
    two_tenants: tuple[Tenant, Tenant], pg_url: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        conn.execute(f"SET ROLE {TENANT_ROLE}")
        for table in TENANT_TABLES:
            assert conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"] == 0


def test_a_connection_is_switched_only_when_lent_another_way(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool switches a connection's role and tenant on checkout only when it was last
    lent another way; lent the same way again it keeps its session, and it is checked with an
    empty query only when it came back longer than ALIVE_WINDOW ago. Autocommit lendings
    leave the next borrower a transaction."""
    from psycopg_pool import ConnectionPool

    from memora.db import pool as pools

    switches: list[tuple[str, str]] = []
    checks: list[object] = []
    switch = pools._switch
    monkeypatch.setattr(
        pools, "_switch", lambda conn, *how: switches.append(how) or switch(conn, *how)
    )
    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(checks.append))
    p = pools.make_pool(pg_url, min_size=1, max_size=1, name="lendings")
    try:

        def session(**lend: Any) -> dict[str, Any]:
            where = p.tenant_connection(**lend) if lend else p.connection()
            with where as conn:
                row = conn.execute(
                    "SELECT current_user AS role, current_setting('memora.tenant') AS tenant"
                ).fetchone()
                return {**row, "autocommit": conn.autocommit}

        switches.clear()
        assert session(tenant_id="t1") == {"role": TENANT_ROLE, "tenant": "t1", "autocommit": False}
        assert session(tenant_id="t1", autocommit=True)["autocommit"] is True
        assert session(tenant_id="t1") == {"role": TENANT_ROLE, "tenant": "t1", "autocommit": False}
        assert switches == [(TENANT_ROLE, "t1")] and checks == []  # back within the window
        assert session(tenant_id="t2")["tenant"] == "t2"
        assert session()["role"] == SYSTEM_ROLE
        assert switches[1:] == [(TENANT_ROLE, "t2"), (SYSTEM_ROLE, "")]
        monkeypatch.setattr(pools, "ALIVE_WINDOW", 0.0)
        assert session()["role"] == SYSTEM_ROLE
        assert len(checks) == 1 and len(switches) == 3  # checked, not switched
    finally:
        p.close()


def test_every_tenant_scoped_table_is_under_row_security(pool: Any) -> None:
    """A table with an agent, unit or tenant column must have a tenant_id column, RLS enabled
    and forced, and the tenant_isolation policy (docs/security.md, for new tables)."""
    with pool.connection() as conn:
        rows = conn.execute(
            """
            SELECT c.relname AS table, c.relrowsecurity AS enabled,
                   c.relforcerowsecurity AS forced,
                   EXISTS (SELECT 1 FROM pg_policies p WHERE p.tablename = c.relname
                           AND p.policyname = 'tenant_isolation') AS policy,
                   EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                           AND a.attname = 'tenant_id' AND NOT a.attisdropped) AS has_tenant
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind = 'r' AND EXISTS (
                SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped
                AND a.attname IN ('agent_id', 'tenant_id', 'unit_id', 'from_unit'))
            """
        ).fetchall()
    scoped = {r["table"] for r in rows}
    assert set(TENANT_TABLES) <= scoped
    unprotected = [r for r in rows if not (r["enabled"] and r["forced"] and r["policy"])]
    assert unprotected == []
    assert all(r["has_tenant"] for r in rows)


def test_search_queries_keep_their_indexes_under_row_security(
    two_tenants: tuple[Tenant, Tenant], pool: Any
) -> None:
    """The keyword match and the metadata filters are index conditions (ts_match_vq,
    jsonb_contains and memora_number declared leakproof: otherwise PostgreSQL would apply
    them only after the policy, as filters), and the semantic and graph steps use their
    indexes."""
    a, _ = two_tenants
    with pool.tenant_connection(a.tenant_id) as conn:
        # plans of this small test database: make the planner show what the indexes can do
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")

        def plan(sql: str, params: Any) -> str:
            rows = conn.execute(f"EXPLAIN {sql}", params).fetchall()
            return "\n".join(r["QUERY PLAN"] for r in rows)

        # only the GIN index can serve the match alone; were the match not allowed as an
        # index condition, this would be a (disabled, still chosen) sequential scan
        keyword = plan("SELECT unit_id FROM memory_search WHERE search_vector @@ %s", ("lisbon",))
        assert "Bitmap Index Scan on idx_memory_search_match" in keyword
        assert "Index Cond: (search_vector @@ " in keyword
        semantic = plan(
            "SELECT unit_id FROM memory_vectors "
            "ORDER BY embedding <=> (SELECT embedding FROM memory_vectors LIMIT 1) LIMIT 10",
            (),
        )
        assert "Index Scan using idx_memory_vectors_embedding" in semantic
        graph = plan(
            "SELECT to_unit FROM memory_links WHERE from_unit = %s::uuid "
            "ORDER BY weight DESC, to_unit LIMIT 20",
            ("00000000-0000-0000-0000-000000000000",),
        )
        assert "Index Only Scan using idx_memory_links_strongest" in graph
        # metadata filters (migration 0011: jsonb_contains and memora_number leakproof), alone
        # so that only their own indexes can serve them
        for alias, table in (("m", "memory_vectors"), ("memory_search", "memory_search")):
            metadata = "metadata" if table == "memory_vectors" else "match"
            for filters, index in (
                ({"scene": "s1"}, metadata),
                ({"turn": {"gte": 2, "lt": 9}}, "turn"),
            ):
                where = compile_filters(Filters.model_validate(filters), alias)
                found = plan(f"SELECT 1 FROM {table} {alias} WHERE true {where.sql}", where.params)
                assert f"idx_{table}_{index}" in found, found
                condition = found.split("Index Cond: ", 1)[-1]
                assert "metadata @> " in condition or "memora_number(metadata" in condition
            # a time range (migration 0013): the said and the occurred branch are each an
            # index range (which index serves which is the planner's choice)
            where = compile_filters(
                Filters.model_validate({"time": {"start": "2024-01-01T00:00:00Z",
                                                 "end": "2024-02-01T00:00:00Z"}}),
                alias,
            )  # fmt: skip
            found = plan(f"SELECT 1 FROM {table} {alias} WHERE true {where.sql}", where.params)
            conditions = [line for line in found.splitlines() if "Index Cond: " in line]
            assert "Seq Scan" not in found, found
            assert any("event_date >= " in line for line in conditions), found
            assert any("occurred_start" in line for line in conditions), found
