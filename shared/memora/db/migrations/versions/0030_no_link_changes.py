"""The query service no longer holds agents' links (issue 55: reading an agent's links whole
cost seconds of both cores at 100k memories, on its first search and every ten minutes after,
for 1–2 ms of a warm search), so nothing reads what 0026 and 0027 record of link
changes: `memory_links.written` (a column, its index and the BEFORE UPDATE trigger that every
link upsert paid), `link_removals` and the triggers that fill it (links deleted, a unit back to
active). `vector_removals` stays: the filters' held units read it.

Revision ID: 0030_no_link_changes
Revises: 0029_held_appends
Create Date: 2026-12-06
"""

from importlib import import_module

from alembic import op

revision = "0030_no_link_changes"
down_revision = "0029_held_appends"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP TRIGGER memory_units_restored ON memory_units")
    op.execute("DROP FUNCTION memory_units_restored()")
    op.execute("DROP TRIGGER memory_links_removed ON memory_links")
    op.execute("DROP FUNCTION memory_links_removed()")
    op.execute("DROP TABLE link_removals")
    op.execute("DROP TRIGGER memory_links_written ON memory_links")
    op.execute("DROP FUNCTION memory_links_written()")
    op.execute("ALTER TABLE memory_links DROP COLUMN written")  # its index with it


def downgrade() -> None:
    versions = "memora.db.migrations.versions"
    import_module(f"{versions}.0026_link_changes").upgrade()
    removed_units = import_module(f"{versions}.0027_removed_units")
    op.execute("ALTER TABLE link_removals ADD COLUMN units uuid[]")
    op.execute(removed_units._links_removed(True))
