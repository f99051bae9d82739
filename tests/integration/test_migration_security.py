"""Migration 0006_security on a database of its own: upgrade fills `tenant_id` for rows that
exist already, downgrade removes policies, columns and triggers and keeps the data (and the
roles, which the suite's main database still uses), and upgrading again works."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from memora.db.migrate import downgrade, upgrade
from tests.conftest import own_database

pytestmark = pytest.mark.integration


@pytest.fixture()
def scratch_url(pg_url: str) -> Iterator[str]:
    with own_database(pg_url, "memora_migrate", migrate=False) as url:
        yield url


def _state(url: str) -> dict[str, object]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute(
            """
            SELECT (SELECT count(*) FROM pg_policies) AS policies,
                   (SELECT count(*) FROM information_schema.columns
                    WHERE table_schema = 'public' AND column_name = 'tenant_id') AS tenant_columns,
                   (SELECT count(*) FROM memory_links) AS links,
                   (SELECT count(*) FROM pg_roles
                    WHERE rolname IN ('memora_tenant', 'memora_system')) AS roles
            """
        ).fetchone()
    assert row is not None
    return dict(row)


def test_0006_is_reversible_and_fills_existing_rows(scratch_url: str) -> None:
    upgrade(scratch_url, 384, "0005_narrow_reads")
    with psycopg.connect(scratch_url) as conn:
        conn.execute("INSERT INTO tenants (tenant_id) VALUES ('acme')")
        conn.execute("INSERT INTO agents (agent_id, tenant_id) VALUES ('acme/al', 'acme')")
        ids = [uuid.uuid4(), uuid.uuid4()]
        for unit in ids:
            conn.execute(
                "INSERT INTO memory_units (id, agent_id, text, fact_type, event_date, "
                "mentioned_at) VALUES (%s, 'acme/al', 'x', 'world', now(), now())",
                (unit,),
            )
        conn.execute(
            "INSERT INTO memory_links (from_unit, to_unit, link_type, weight) "
            "VALUES (%s, %s, 'temporal', 0.5)",
            ids,
        )
    before = _state(scratch_url)
    assert before["policies"] == 0

    upgrade(scratch_url, 384)
    after = _state(scratch_url)
    # 11 tables under RLS by 0006, 6 more by 0010 (the conversation index, the lifecycle),
    # memory_vectors by 0012, webhooks and webhook_deliveries by 0016, memory_terms by 0020,
    # memory_postings by 0022, vector_removals by 0024 (link_removals: 0026 to 0030),
    # entity_relations by 0036
    assert after["policies"] == 24 and after["links"] == 1 and after["roles"] == 2
    with psycopg.connect(scratch_url, row_factory=dict_row) as conn:
        tenants = {
            t: conn.execute(f"SELECT DISTINCT tenant_id FROM {t}").fetchone()["tenant_id"]  # type: ignore[index]
            for t in ("memory_units", "memory_links", "agents")
        }
    assert tenants == {"memory_units": "acme", "memory_links": "acme", "agents": "acme"}

    downgrade(scratch_url, 384, "0005_narrow_reads")
    assert _state(scratch_url) == before  # roles kept: the main test database uses them
    upgrade(scratch_url, 384)
    assert _state(scratch_url) == after
