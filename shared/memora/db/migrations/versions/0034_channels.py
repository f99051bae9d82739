"""Channels (seed 002 §7.3): where a message was said (`web`, `console`, `teams`...).

- `conversation_messages.channel`: the message's channel (NULL: none given).
- `conversation_chunks.channels`: the channels of the messages a chunk covers (like `roles`),
  what conversation search filters on. Existing chunks cover messages without a channel.

Memories carry their item's channel in their metadata (`channel`), where memory search's
metadata filters already reach; nothing to add for them.

Revision ID: 0034_channels
Revises: 0033_foreign_key_indexes
Create Date: 2026-12-07
"""

from alembic import op

revision = "0034_channels"
down_revision = "0033_foreign_key_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE conversation_messages ADD COLUMN channel TEXT")
    op.execute("ALTER TABLE conversation_chunks ADD COLUMN channels TEXT[] NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE conversation_chunks DROP COLUMN channels")
    op.execute("ALTER TABLE conversation_messages DROP COLUMN channel")
