"""Deletes stay in proportion to what they delete (issue 55): on the migrated schema, every
foreign key has an index on its referencing columns (PostgreSQL checks the key on each deleted
referenced row with a query on them), and every table an agent's deletion and its receipt look
up by `agent_id` (a document's, a message's rows: `document_pk`, `message_pk`) has an index led
by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import own_database

pytestmark = pytest.mark.integration

UNINDEXED_FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text AS tbl, c.conname
FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
  AND NOT EXISTS (
      SELECT 1 FROM pg_index i
      WHERE i.indrelid = c.conrelid
        AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey
        AND c.conkey @> (i.indkey::int2[])[0:cardinality(c.conkey) - 1])
ORDER BY 1, 2
"""

NOT_LED_BY = """
SELECT c.relname
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE a.attname = %(col)s AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
  AND c.relnamespace = current_schema()::regnamespace
  AND NOT EXISTS (
      SELECT 1 FROM pg_index i
      JOIN pg_attribute k ON k.attrelid = i.indrelid AND k.attnum = i.indkey[0]
      WHERE i.indrelid = c.oid AND k.attname = %(col)s)
ORDER BY 1
"""


@pytest.fixture(scope="module")
def catalogue(pg_url: str) -> Iterator[Any]:
    with own_database(pg_url, "memora_indexes") as url, psycopg.connect(url) as conn:
        conn.row_factory = dict_row
        yield conn


def test_every_foreign_key_is_indexed(catalogue: Any) -> None:
    assert catalogue.execute(UNINDEXED_FOREIGN_KEYS).fetchall() == []


@pytest.mark.parametrize("column", ["agent_id", "document_pk", "message_pk"])
def test_every_table_holding_a_subject_is_indexed_by_it(catalogue: Any, column: str) -> None:
    assert catalogue.execute(NOT_LED_BY, {"col": column}).fetchall() == []
