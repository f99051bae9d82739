"""Canonical entity names (issue 32, item 4): how often each surface form named the entity.

- `entities.name_counts`: {surface form: mentions}; the entity's `canonical_name` is its most
  frequent form (ties: the longer), kept so by entity resolution as mentions accrue; the other
  forms stay its aliases. Filled here from the mentions stored in `unit_entities`; the
  `entity_names` maintenance job then re-cleans the stored names and renames the entities.

Revision ID: 0017_entity_names
Revises: 0016_webhooks
Create Date: 2026-11-26
"""

from alembic import op

revision = "0017_entity_names"
down_revision = "0016_webhooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE entities ADD COLUMN name_counts JSONB NOT NULL DEFAULT '{}'")
    op.execute(
        """
        UPDATE entities e SET name_counts = c.counts
        FROM (
            SELECT entity_id, jsonb_object_agg(mention, n) AS counts
            FROM (SELECT entity_id, mention, count(*) AS n FROM unit_entities
                  GROUP BY entity_id, mention) m
            GROUP BY entity_id
        ) c
        WHERE e.id = c.entity_id
        """
    )


def downgrade() -> None:
    op.execute("ALTER TABLE entities DROP COLUMN name_counts")
