"""Privacy (issue 31, item 2): what may be remembered from a message.

- `conversation_messages.remember`: false for a message of a temporary chat (or a request
  marked `temporary`): it is stored for its conversation, but no memory is extracted from it.
- `conversation_messages.searchable`: false keeps the message out of the conversation index
  (chunks, their context, repair and reindex); by default it follows `remember`.

Revision ID: 0018_privacy
Revises: 0017_entity_names
Create Date: 2026-11-26
"""

from alembic import op

revision = "0018_privacy"
down_revision = "0017_entity_names"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # constant defaults: no table rewrite, instant on a large table
    op.execute(
        "ALTER TABLE conversation_messages "
        "ADD COLUMN remember BOOLEAN NOT NULL DEFAULT true, "
        "ADD COLUMN searchable BOOLEAN NOT NULL DEFAULT true"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE conversation_messages DROP COLUMN remember, DROP COLUMN searchable")
