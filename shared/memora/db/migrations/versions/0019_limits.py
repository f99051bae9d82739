"""Per-agent limits (seed 002 §4.9): `agents.limits` holds the limits an agent set for itself
(max_memories, max_reflections, archive_retention_days; a null value: no limit); a key it did
not set follows the MEMORA_* default (memora.lifecycle.limits).

Revision ID: 0019_limits
Revises: 0018_privacy
Create Date: 2026-11-26
"""

from alembic import op

revision = "0019_limits"
down_revision = "0018_privacy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE agents ADD COLUMN limits JSONB NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE agents DROP COLUMN limits")
