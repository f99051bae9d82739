"""The link type in the strongest-links index's key, so that each unit's links have one order.

`idx_memory_links_strongest` was `(from_unit, weight DESC, to_unit) INCLUDE (link_type,
tenant_id)`: two links of one unit to the same target with the same weight (an entity and a
temporal link, both 1.0) tied, and a `LIMIT` could keep either. The graph retriever's reads
by key and against the units held as failing a filter then disagreed on which one a unit's
fanout kept. With the type in the key the graph's reads order by `(weight DESC, to_unit,
link_type)` from the index alone, as they did without it (an incremental sort in each
lateral added to every read: docs/benchmarks-history.md, the read path's fourteenth round).

Revision ID: 0025_link_order
Revises: 0024_vector_changes
Create Date: 2026-11-27
"""

from alembic import op

revision = "0025_link_order"
down_revision = "0024_vector_changes"
branch_labels = None
depends_on = None


def _strongest(key: str, include: str) -> None:
    """Build the index under a new name, then put it in the old one's place: the graph's
    reads have an index all along within the migration's transaction."""
    op.execute(
        f"CREATE INDEX idx_memory_links_strongest_new ON memory_links ({key}) INCLUDE ({include})"
    )
    op.execute("DROP INDEX idx_memory_links_strongest")
    op.execute("ALTER INDEX idx_memory_links_strongest_new RENAME TO idx_memory_links_strongest")


def upgrade() -> None:
    _strongest("from_unit, weight DESC, to_unit, link_type", "tenant_id")


def downgrade() -> None:
    _strongest("from_unit, weight DESC, to_unit", "link_type, tenant_id")
