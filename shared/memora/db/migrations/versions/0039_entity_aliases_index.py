"""A GIN index on `entities.aliases` (issue 55: a large agent's search). The entity retriever
looks up the entities a query names by name or alias (`normalized_name = ANY(names) OR
aliases && names`), and the embedding of the query waits for it. Without an index on the
aliases the OR could only be answered by reading every entity of the agent, on every search
naming someone; with it, PostgreSQL ORs the name index and this one (a small agent's lookup
keeps the agent's index). Resolution's lookups by alias use it too (written `aliases @>
ARRAY[name]`). Figures: docs/scaling.md, "Many agents in one database".

Revision ID: 0039_entity_aliases_index
Revises: 0038_entity_traits
Create Date: 2026-12-07
"""

from alembic import op

revision = "0039_entity_aliases_index"
down_revision = "0038_entity_traits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX idx_entities_aliases ON entities USING gin (aliases)")


def downgrade() -> None:
    op.execute("DROP INDEX idx_entities_aliases")
