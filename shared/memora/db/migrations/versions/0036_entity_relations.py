"""Entity relations (issue 57, item 4): "Maya works at Northwind", "Priya's brother Sam", read
from memories by memora.lifecycle.entity_relations and written by the pipeline's entity stage.

- `entity_relations`: one row per relation between two of an agent's entities over one span
  of validity: `subject_id`, `relation` (the closed vocabulary of memora.basics.relations),
  `object_id`; `evidence`, the memories that state it; `valid_from` (the first evidence's
  date) and `valid_until` (NULL: holds now). A relation one value at a time holds (lives_in,
  works_at, studies_at, partner_of) is closed by the next value, which `superseded_by` names;
  any relation is closed by an explicit end ("Dan left Deloitte"), whose memory is `ended_by`.
  `source`: who read it (`parse`, `llm`).
- Both entities reference `entities` ON DELETE CASCADE: a relation goes with either end (and
  so with its agent). `evidence` is an array of memory ids: purging memories takes them out
  of it, and a relation left with no evidence goes (memora.store.purge).
- `tenant_id` generated from the agent key and the `tenant_isolation` policy, as every other
  tenant-scoped table (0010).
- `memory_units.entity_relations` (JSONB, NULL: none): the relations the LLM extractor read in
  the fact ([{"subject", "relation", "object"}] by name), which the entity stage records with
  `source` `llm` beside those the parse reads.
- `idx_entity_relations_subject` and `_object`: an entity's relations either way, current
  first; `idx_entity_relations_evidence` (GIN): the relations a purged memory is evidence of.

Revision ID: 0036_entity_relations
Revises: 0035_trash
Create Date: 2026-12-07
"""

from alembic import op

revision = "0036_entity_relations"
down_revision = "0035_trash"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
RELATIONS = (
    "'works_at', 'lives_in', 'studies_at', 'member_of', 'manages', 'parent_of', 'sibling_of', "
    "'partner_of', 'friend_of', 'colleague_of'"
)


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE entity_relations (
            id            UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            agent_id      TEXT NOT NULL,
            subject_id    UUID NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            relation      TEXT NOT NULL CHECK (relation IN ({RELATIONS})),
            object_id     UUID NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            evidence      UUID[] NOT NULL DEFAULT '{{}}',
            source        TEXT NOT NULL DEFAULT 'parse' CHECK (source IN ('parse', 'llm')),
            valid_from    TIMESTAMPTZ NOT NULL,
            valid_until   TIMESTAMPTZ,
            superseded_by UUID REFERENCES entity_relations(id) ON DELETE SET NULL,
            ended_by      UUID,
            created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
            tenant_id     TEXT NOT NULL GENERATED ALWAYS AS (memora_key_tenant(agent_id)) STORED,
            CHECK (subject_id <> object_id),
            CHECK (valid_until IS NULL OR valid_until >= valid_from)
        )
        """
    )
    op.execute(
        "CREATE INDEX idx_entity_relations_subject ON entity_relations "
        "(subject_id, (valid_until IS NOT NULL), valid_from DESC)"
    )
    op.execute(
        "CREATE INDEX idx_entity_relations_object ON entity_relations "
        "(object_id, (valid_until IS NOT NULL), valid_from DESC)"
    )
    op.execute(
        "CREATE INDEX idx_entity_relations_superseded_by ON entity_relations (superseded_by)"
    )
    op.execute("CREATE INDEX idx_entity_relations_agent ON entity_relations (agent_id)")
    op.execute(
        "CREATE INDEX idx_entity_relations_evidence ON entity_relations USING gin (evidence)"
    )
    op.execute("ALTER TABLE memory_units ADD COLUMN entity_relations JSONB")
    op.execute("ALTER TABLE entity_relations ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE entity_relations FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON entity_relations TO {TENANT_ROLE} "
        f"USING ({POLICY}) WITH CHECK ({POLICY})"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE memory_units DROP COLUMN entity_relations")
    op.execute("DROP TABLE entity_relations")
