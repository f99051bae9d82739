"""A unit's text is written with its vector row (issue 29), so that a query service holding the
keyword index of the units passing a filter (`memora.retrieval.caches.filter_terms`) sees a unit whose
text changed among those written since it last looked (`memory_vectors.written`, migration
0024), as it sees a unit re-embedded or whose filter columns changed.

`memory_vectors_update` (0012) fires on `text` too: `memory_vectors_sync` then upserts the
row unchanged, and its BEFORE UPDATE trigger (0024) moves `written`. The write path already
sets the embedding with the text (`store.lifecycle.merge_into`); this keeps it so for every
statement that changes a unit's text.

Revision ID: 0028_text_written
Revises: 0027_removed_units
Create Date: 2026-11-28
"""

from alembic import op

revision = "0028_text_written"
down_revision = "0027_removed_units"
branch_labels = None
depends_on = None

COPIED = "agent_id, fact_type, metadata, event_date, occurred_start, occurred_end"  # as 0012


def _trigger(columns: str) -> None:
    op.execute("DROP TRIGGER IF EXISTS memory_vectors_update ON memory_units")
    op.execute(
        f"CREATE TRIGGER memory_vectors_update AFTER UPDATE OF {columns} "
        "ON memory_units FOR EACH ROW EXECUTE FUNCTION memory_vectors_sync()"
    )
    op.execute("ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_vectors_update")


def upgrade() -> None:
    _trigger(f"embedding, status, text, {COPIED}")


def downgrade() -> None:
    _trigger(f"embedding, status, {COPIED}")
