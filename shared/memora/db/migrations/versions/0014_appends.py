"""Appends (issue 24): messages added to a conversation as they happen, processed alone.

- `operations.kind` gains `append`: an operation over the messages one append added.
- `conversation_messages.ordinal`: the message's place in arrival order within its document,
  stable for its life; its units' `item_index` is this ordinal (unique with `seq` per
  document). `position` stays the conversation order (by event date, then arrival), which a
  late message changes for those after it without touching any unit.
- `conversation_messages.extracted_by`: the operation that extracts the message (its claim).
  Each ingest, append or edit operation extracts, resolves and links only the units of the
  messages it claims, so operations on one conversation can run side by side: a whole
  re-post claims every message and so takes over from appends still in flight.

- `documents.last_operation_id`: the latest operation that stored content in the document (a
  post or an append), which the document routes report; `current_operation_id` stays the
  post that appends build on.

Existing messages get `ordinal = position` and the claim of their document's current
operation (an edit still in flight keeps its message).

Revision ID: 0014_appends
Revises: 0013_time_indexes
Create Date: 2026-11-25
"""

from alembic import op

revision = "0014_appends"
down_revision = "0013_time_indexes"
branch_labels = None
depends_on = None

KINDS = ("ingest", "opinions", "message_edit", "message_delete", "repair", "reindex", "append")


def _kinds(kinds: tuple[str, ...]) -> None:
    op.execute("ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_kind_check")
    listed = ", ".join(f"'{k}'" for k in kinds)
    op.execute(
        f"ALTER TABLE operations ADD CONSTRAINT operations_kind_check CHECK (kind IN ({listed}))"
    )


def upgrade() -> None:
    _kinds(KINDS)
    op.execute("ALTER TABLE conversation_messages ADD COLUMN ordinal INTEGER")
    op.execute("ALTER TABLE conversation_messages ADD COLUMN extracted_by UUID")
    op.execute(
        """
        UPDATE conversation_messages m SET ordinal = m.position,
               extracted_by = d.current_operation_id
        FROM documents d WHERE d.id = m.document_pk
        """
    )
    op.execute(
        """
        UPDATE conversation_messages m SET extracted_by = o.id FROM operations o
        WHERE o.kind = 'message_edit' AND o.status IN ('queued', 'running')
          AND m.id = (o.payload->>'message_pk')::uuid
        """
    )
    op.execute("ALTER TABLE conversation_messages ALTER COLUMN ordinal SET NOT NULL")
    op.execute("ALTER TABLE documents ADD COLUMN last_operation_id UUID")


def downgrade() -> None:
    op.execute("DELETE FROM operations WHERE kind = 'append'")
    op.execute("ALTER TABLE documents DROP COLUMN last_operation_id")
    _kinds(KINDS[:-1])
    op.execute("ALTER TABLE conversation_messages DROP COLUMN extracted_by")
    op.execute("ALTER TABLE conversation_messages DROP COLUMN ordinal")
