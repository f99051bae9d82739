"""The trash (issue 57, item 2): a document taken out of every search yet restorable, and the
expiry of temporary chats.

- `documents.trashed_at`: when the document went to the trash (`DELETE ...?soft=true`); NULL
  while it is live. Conversation search and the document listing leave trashed documents out;
  the `document_expiry` job deletes, for real, those trashed longer ago than the retention.
- `memory_units.status` takes one more value, `trashed`: the units of a trashed document that
  were active or superseded. Like every status but `active` it leaves `memory_search` and
  `memory_vectors` through their triggers (0008, 0012), so a unit leaves every retriever at
  once, the history retriever (superseded units) included. `memory_units.trashed_from` keeps
  the status each had, which the document's restore gives back. Units forgotten or archived
  before stay as they are: a document's restore does not bring them back.
- A BEFORE INSERT trigger writes trashed a unit of a trashed document: a stage that was working
  on the document when it went to the trash (whatever path: COPY included, hence ENABLE
  ALWAYS, as 0015's). Trash and restore wait for the document's running operations first.
- `idx_documents_trashed` (agent_id, trashed_at) WHERE trashed_at IS NOT NULL: the trashed
  documents of an agent (conversation search leaves their chunks out) and those past the
  retention (the job); it holds the trash only.
- `idx_conversation_messages_temporary` (document_pk) WHERE NOT remember: the documents that
  hold messages of a temporary chat (`remember = false`, 0018), where the job looks for
  temporary chats past their retention; it holds those messages only.

Downgrade gives trashed units their status back and forgets which documents were in the
trash (they are live again).

Revision ID: 0035_trash
Revises: 0034_channels
Create Date: 2026-12-07
"""

from alembic import op

revision = "0035_trash"
down_revision = "0034_channels"
branch_labels = None
depends_on = None

STATUSES = "'active', 'superseded', 'forgotten', 'archived'"


def _check(name: str, condition: str) -> None:
    op.execute(f"ALTER TABLE memory_units DROP CONSTRAINT IF EXISTS {name}")
    op.execute(f"ALTER TABLE memory_units ADD CONSTRAINT {name} CHECK ({condition})")


def upgrade() -> None:
    op.execute("ALTER TABLE documents ADD COLUMN trashed_at TIMESTAMPTZ")
    op.execute("ALTER TABLE memory_units ADD COLUMN trashed_from TEXT")
    _check("memory_units_trashed_from_check", "trashed_from IN ('active', 'superseded')")
    _check("memory_units_status_check", f"status IN ({STATUSES}, 'trashed')")
    op.execute(
        """
        CREATE FUNCTION memory_units_trashed_document() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM documents
                       WHERE id = NEW.document_pk AND trashed_at IS NOT NULL) THEN
                NEW.trashed_from := NEW.status;
                NEW.status := 'trashed';
                NEW.status_at := now();
            END IF;
            RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memory_units_trashed_document BEFORE INSERT ON memory_units "
        "FOR EACH ROW WHEN (NEW.document_pk IS NOT NULL "
        "AND NEW.status IN ('active', 'superseded')) "
        "EXECUTE FUNCTION memory_units_trashed_document()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_trashed_document")
    op.execute(
        "CREATE INDEX idx_documents_trashed ON documents (agent_id, trashed_at) "
        "WHERE trashed_at IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX idx_conversation_messages_temporary ON conversation_messages "
        "(document_pk) WHERE NOT remember"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_conversation_messages_temporary")
    op.execute("DROP INDEX IF EXISTS idx_documents_trashed")
    op.execute("DROP TRIGGER IF EXISTS memory_units_trashed_document ON memory_units")
    op.execute("DROP FUNCTION IF EXISTS memory_units_trashed_document()")
    op.execute(
        "UPDATE memory_units SET status = trashed_from, status_at = now() WHERE status = 'trashed'"
    )
    _check("memory_units_status_check", f"status IN ({STATUSES})")
    op.execute("ALTER TABLE memory_units DROP COLUMN trashed_from")
    op.execute("ALTER TABLE documents DROP COLUMN trashed_at")
