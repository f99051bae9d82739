"""Deletes in proportion to what they delete (issue 55): every foreign key gets an index on its
referencing columns. PostgreSQL checks a foreign key on each deleted referenced row with a query
on the referencing table; without an index that query reads the whole table, so deleting one
small agent's conversation read every operation and every memory unit of the database once for
each of its units (a 60-unit conversation took 2.07 s beside one agent of 200k units:
`bench/deletes.py`), and
deleting an entity read every link.

- `operations (document_pk)`: `ON DELETE SET NULL` from `documents`, and the document delete's
  own `DELETE FROM operations WHERE document_pk = …`.
- `memory_units (superseded_by)`: `ON DELETE SET NULL` from `memory_units` itself.
- `memory_links (entity_id)`: `ON DELETE CASCADE` from `entities` (orphaned entities go with a
  document, all of an agent's with the agent).
- `job_cursors (agent_id)`: not a foreign key, but an agent's deletion and its receipt look its
  rows up by agent, and the key leads with the job.

Each partial where the column is mostly empty. `tests/integration/test_schema_indexes.py`
keeps every foreign key indexed.

Revision ID: 0033_foreign_key_indexes
Revises: 0032_evolve_operations
Create Date: 2026-12-06
"""

from alembic import op

revision = "0033_foreign_key_indexes"
down_revision = "0032_evolve_operations"
branch_labels = None
depends_on = None

INDEXES = {
    "idx_operations_document": "operations (document_pk) WHERE document_pk IS NOT NULL",
    "idx_memory_units_superseded_by": "memory_units (superseded_by) "
    "WHERE superseded_by IS NOT NULL",
    "idx_memory_links_entity": "memory_links (entity_id) WHERE entity_id IS NOT NULL",
    "idx_job_cursors_agent": "job_cursors (agent_id)",
}


def upgrade() -> None:
    for name, target in INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON {target}")


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
