"""Evolve now (issue 57, seed 002 §4.5): `operations.kind` gains `evolve`, an agent's
consolidation (and reflection, when due) run now as an operation, asked for by
`POST /api/agents/{agent_id}/evolve` or by an append that ends its conversation.

Revision ID: 0032_evolve_operations
Revises: 0031_mention_dates
Create Date: 2026-12-06
"""

from importlib import import_module

from alembic import op

revision = "0032_evolve_operations"
down_revision = "0031_mention_dates"
branch_labels = None
depends_on = None

appends = import_module("memora.db.migrations.versions.0014_appends")


def upgrade() -> None:
    appends._kinds((*appends.KINDS, "evolve"))


def downgrade() -> None:
    op.execute("DELETE FROM operations WHERE kind = 'evolve'")
    appends._kinds(appends.KINDS)
