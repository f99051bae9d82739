"""Statements a search runs each time that PostgreSQL keeps with one generic plan, on real
PostgreSQL: planned for their parameters each time, their planning cost more than their run
(the mentions' refresh 0.48–0.81 ms a call against 0.24–0.34 at 100k memories in a slow phase
of the machine; docs/benchmarks-history.md, nineteenth round). A custom plan that costs less
than the generic one keeps PostgreSQL from ever choosing it; these tests catch a change that
lets it."""

from __future__ import annotations

from typing import Any

import pytest

from memora.retrieval.caches import mentions
from memora.retrieval.caches.filter_holder import written_since

pytestmark = pytest.mark.integration

CALLS = 8  # PostgreSQL plans a prepared statement's first five runs for their parameters


def _plans(conn: Any, fragment: str) -> tuple[int, int]:
    """(generic, custom) plans of this session's one prepared statement holding `fragment`."""
    rows = conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
        (f"%{fragment}%",),
    ).fetchall()
    assert len(rows) == 1, (fragment, rows)
    return int(rows[0]["generic_plans"]), int(rows[0]["custom_plans"])


def test_the_named_entities_mentions_are_refreshed_with_a_generic_plan(pg_url: str) -> None:
    """On the statistics of 100k memories (20 entities, 5,000 mentions each; in a database of
    its own, rows written without their triggers and foreign keys), one entity or three, read since
    a point: the same generic plan from the sixth call. (With the entities as a plain array,
    each custom plan, knowing how many there were, cost less, and every call was planned.)"""
    import psycopg
    from psycopg.rows import dict_row

    from tests.conftest import own_database

    with own_database(pg_url, "plans") as url, psycopg.connect(url, row_factory=dict_row) as conn:
        for table in ("entities", "unit_entities"):  # a database of its own: no foreign keys
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        conn.execute(
            "INSERT INTO entities (id, agent_id, canonical_name, normalized_name, aliases,"
            " entity_type, mention_count, first_seen, last_seen, created_at, name_counts)"
            " SELECT gen_random_uuid(), 'a', 'n' || i, 'n' || i, '{}', 'PERSON', 5000, now(),"
            " now(), now(), '{}' FROM generate_series(1, 20) i"
        )
        conn.execute(
            "INSERT INTO unit_entities (unit_id, entity_id, mention, tenant_id, signature, written)"
            " SELECT gen_random_uuid(), e.id, 'n', 'default', NULL, i FROM entities e"
            " CROSS JOIN generate_series(1, 5000) i"
        )
        conn.execute("ANALYZE entities")
        conn.execute("ANALYZE unit_entities")
        entities = [r["id"] for r in conn.execute("SELECT id FROM entities LIMIT 3")]
        conn.commit()
        for i in range(CALLS):
            n = 1 + 2 * (i % 2)
            found = mentions._read(conn, entities[:n], since=[10_000 + i] * n)
            assert set(found) == set(entities[:n]) and not any(r.ids for r in found.values())
        refresh = "LEFT JOIN unit_entities ue ON ue.entity_id = e.entity"
        assert _plans(conn, refresh) == (CALLS - 5, 5)


def test_the_held_filters_check_for_changes_with_a_generic_plan(pg_url: str, agent_id: str) -> None:
    """`written_since`, the check a held filter's entry makes each search before reading what
    changed: one generic plan from the sixth call, whatever `since` (a connection of its own:
    a pooled one may have run it before)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        for since in range(CALLS):
            assert written_since(conn, agent_id, 10**9 + since) is False
        assert _plans(conn, "ORDER BY r.removed LIMIT 1") == (CALLS - 5, 5)
