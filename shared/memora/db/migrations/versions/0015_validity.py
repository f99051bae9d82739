"""Validity windows (issue 26): when each memory's fact was true.

- `memory_units.valid_from` (NOT NULL): when the fact began to hold. A BEFORE INSERT trigger
  fills it for a row that does not name it, on every insert path (the pipeline's COPY
  included, hence ENABLE ALWAYS): the fact's own time when the extractor found one
  (`occurred_start`), else when it was said (`event_date`). Remember names it when a
  superseding statement says when the change happened. Existing rows: the same rule.
- `memory_units.valid_until` (NULL: still true): set when a later fact supersedes this one (when
  the newer statement says the change happened, else when it was learned), cleared by restore.
  Existing superseded rows get their `status_at`; rows superseded by a merge (a restatement
  folded into another memory, `status_reason` "merged: …") keep NULL: their fact still holds.

No index: the default search never reads these columns, and a time-scoped search reads them
only on the agent's superseded units (through `idx_memory_units_inactive`, migration 0008) and
on the fused candidates (by primary key). Row-level security is unchanged (same table).

Revision ID: 0015_validity
Revises: 0014_appends
Create Date: 2026-11-26
"""

from alembic import op

revision = "0015_validity"
down_revision = "0014_appends"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memory_units ADD COLUMN valid_from TIMESTAMPTZ, "
        "ADD COLUMN valid_until TIMESTAMPTZ"
    )
    op.execute(
        """
        UPDATE memory_units SET valid_from = coalesce(occurred_start, event_date, created_at),
            valid_until = CASE WHEN status = 'superseded'
                                    AND NOT starts_with(coalesce(status_reason, ''), 'merged')
                               THEN status_at END
        """
    )
    op.execute("ALTER TABLE memory_units ALTER COLUMN valid_from SET NOT NULL")
    op.execute(
        """
        CREATE FUNCTION memory_units_valid_from() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.valid_from := coalesce(NEW.valid_from, NEW.occurred_start, NEW.event_date, now());
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_units_valid_from BEFORE INSERT ON memory_units FOR EACH ROW "
        "EXECUTE FUNCTION memory_units_valid_from()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_valid_from")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_units_valid_from ON memory_units")
    op.execute("DROP FUNCTION IF EXISTS memory_units_valid_from()")
    op.execute("ALTER TABLE memory_units DROP COLUMN valid_until, DROP COLUMN valid_from")
