"""Opinion versions: a new opinion may supersede an earlier one (a linear history per opinion).

Opinion units stay immutable; a revision is a new unit whose `supersedes` points at the version
it replaces. The partial unique index keeps each history linear (one successor per version).

Revision ID: 0002_opinion_versions
Revises: 0001
Create Date: 2026-11-22
"""

from alembic import op

revision = "0002_opinion_versions"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memory_units ADD COLUMN supersedes UUID "
        "REFERENCES memory_units(id) ON DELETE SET NULL"
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_memory_units_supersedes ON memory_units (supersedes) "
        "WHERE supersedes IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS uq_memory_units_supersedes")
    op.execute("ALTER TABLE memory_units DROP COLUMN IF EXISTS supersedes")
