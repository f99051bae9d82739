"""Held appends (issue 60): an append operation made while its conversation's previous one is
still before its embedding waits for it (`payload.after`, `payload.hold = 'waiting'`), and that
one's embed stage releases it (`memora.store.append_operations.release`). This partial index
finds the operations waiting on a given one; it holds only those waiting.

Revision ID: 0029_held_appends
Revises: 0028_text_written
Create Date: 2026-12-06
"""

from alembic import op

revision = "0029_held_appends"
down_revision = "0028_text_written"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX idx_operations_held ON operations ((payload ->> 'after')) "
        "WHERE payload ->> 'hold' = 'waiting'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_operations_held")
