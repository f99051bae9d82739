"""Migration 0015_validity on a database of its own: existing memories get their window
(`valid_from` from the fact's own time, else when it was said; `valid_until` for memories a
changed fact superseded, not for merged restatements), new rows get `valid_from` from the
insert trigger whatever path writes them, and downgrade then upgrade again works."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from memora.db.migrate import downgrade, upgrade
from tests.conftest import own_database

pytestmark = pytest.mark.integration

SAID = datetime(2024, 5, 1, tzinfo=UTC)
HAPPENED = datetime(2023, 2, 1, tzinfo=UTC)
CHANGED = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture()
def scratch_url(pg_url: str) -> Iterator[str]:
    with own_database(pg_url, "memora_validity", migrate=False) as url:
        yield url


def _unit(conn: Any, occurred: datetime | None = None, **status: Any) -> uuid.UUID:
    unit = uuid.uuid4()
    conn.execute(
        "INSERT INTO memory_units (id, agent_id, text, fact_type, event_date, mentioned_at, "
        "occurred_start, status, status_at, status_reason) "
        "VALUES (%s, 'al', 'x', 'world', %s, %s, %s, %s, %s, %s)",
        (unit, SAID, SAID, occurred, status.get("status", "active"), status.get("at"),
         status.get("reason")),
    )  # fmt: skip
    return unit


def _window(url: str, unit: uuid.UUID) -> tuple[datetime, datetime | None]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT valid_from, valid_until FROM memory_units WHERE id = %s", (unit,)
        ).fetchone()
    assert row is not None
    return row["valid_from"], row["valid_until"]


def test_0015_fills_existing_windows_and_new_rows_and_is_reversible(scratch_url: str) -> None:
    upgrade(scratch_url, 384, "0014_appends")
    with psycopg.connect(scratch_url) as conn:
        conn.execute("INSERT INTO agents (agent_id) VALUES ('al')")
        said = _unit(conn)
        dated = _unit(conn, HAPPENED)
        replaced = _unit(conn, status="superseded", at=CHANGED, reason="moved")
        merged = _unit(conn, status="superseded", at=CHANGED, reason="merged: near-duplicate")
        forgotten = _unit(conn, status="forgotten", at=CHANGED, reason="secret")

    upgrade(scratch_url, 384)
    assert _window(scratch_url, said) == (SAID, None)
    assert _window(scratch_url, dated) == (HAPPENED, None)
    assert _window(scratch_url, replaced) == (SAID, CHANGED)
    assert _window(scratch_url, merged) == (SAID, None)
    assert _window(scratch_url, forgotten) == (SAID, None)
    with psycopg.connect(scratch_url) as conn:  # a path that does not name valid_from
        new, new_dated = _unit(conn), _unit(conn, HAPPENED)
    assert _window(scratch_url, new) == (SAID, None)
    assert _window(scratch_url, new_dated) == (HAPPENED, None)

    downgrade(scratch_url, 384, "0014_appends")
    with psycopg.connect(scratch_url) as conn:
        columns = conn.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'memory_units' "
            "AND column_name IN ('valid_from', 'valid_until')"
        ).fetchone()
        assert columns == (0,)
        assert conn.execute("SELECT count(*) FROM memory_units").fetchone() == (7,)
    upgrade(scratch_url, 384)
    assert _window(scratch_url, replaced) == (SAID, CHANGED)
