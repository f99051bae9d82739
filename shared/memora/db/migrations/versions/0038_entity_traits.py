"""What has been said of an entity that tells two of one name apart (issue 57, item 7; seed 004
"context-aware" resolution): `entities.traits`, counts of the evidence read from the memories
that mention it (memora.entities.traits): `male` / `female` (a pronoun that refers to it, a
gendered kin word or title: "Sam said she…", "my brother Sam", "Mrs. Taylor"), `animal` ("our
cat Luna", "a dog named Rocky") and `human` ("Luna told me…", "Bella from marketing"). Entity
resolution does not merge a mention into an entity whose evidence mostly says otherwise; an
entity without evidence is `{}`, as every entity before this migration.

Revision ID: 0038_entity_traits
Revises: 0037_embedding_generations
Create Date: 2026-12-07
"""

from alembic import op

revision = "0038_entity_traits"
down_revision = "0037_embedding_generations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE entities ADD COLUMN traits JSONB NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE entities DROP COLUMN traits")
