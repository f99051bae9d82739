"""`memora db wait` against the suite's PostgreSQL: it returns once the schema reaches this
code's head (or a newer release's revision), waits while it is missing or behind, and fails
after its timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memora.db.migrate import head_revision, schema_state, upgrade
from tests.conftest import own_database

pytestmark = pytest.mark.integration


@pytest.fixture()
def empty_db(pg_url: str) -> Iterator[str]:
    with own_database(pg_url, "memora_db_wait", migrate=False) as url:
        yield url


def _wait(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "db", "wait", "--interval", "0.2", *args],
        env={**os.environ, "MEMORA_DATABASE_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_returns_at_once_on_a_migrated_database(pg_url: str) -> None:
    assert schema_state(pg_url) == "current"
    out, _ = _wait(pg_url, "--timeout", "30").communicate(timeout=60)
    assert "schema is current" in out and head_revision() in out


def _next_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, "memora db wait ended early"
    return line


def test_waits_for_the_migration_then_returns(empty_db: str) -> None:
    assert schema_state(empty_db) == "missing"
    waiting = _wait(empty_db, "--timeout", "300")
    assert "database is missing" in _next_line(waiting)  # still waiting: no schema yet
    upgrade(empty_db, 384, "0004_tenants")
    assert schema_state(empty_db) == "behind"
    assert "database is behind" in _next_line(waiting)  # an older revision is not enough
    assert waiting.poll() is None
    upgrade(empty_db, 384)
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, out
    assert "schema is current" in out


def test_a_newer_releases_revision_counts_as_ready(empty_db: str) -> None:
    upgrade(empty_db, 384)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_a_newer_release'")
    assert schema_state(empty_db) == "ahead"
    out, _ = _wait(empty_db, "--timeout", "30").communicate(timeout=60)
    assert "schema is ahead" in out


def test_times_out_with_status_1(empty_db: str, postgres: Any) -> None:
    waiting = _wait(empty_db, "--timeout", "1")
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 1 and "not at" in out
    unreachable = f"postgresql://postgres@{postgres.host}:1/memora"  # nothing listens on port 1
    waiting = _wait(unreachable, "--timeout", "1")
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 1 and "unreachable" in out
