"""Row-level security on the tables added after 0006_security: the conversation index
(0007_conversations) and the lifecycle's audit trail and job cursors (0008_lifecycle), with the
same `tenant_id` column and `tenant_isolation` policy as every other tenant-scoped table.

- Tables keyed by an agent: a stored generated column from the agent key
  (`memora_key_tenant(agent_id)`, created by 0006_security).
- `unit_sources` (keyed by a unit): filled from the unit's row by a BEFORE INSERT trigger
  (ENABLE ALWAYS), like `unit_entities`.
- The two roles may use the schema's sequences (`memory_events.id` is a BIGSERIAL), now and
  for sequences made later, as 0006_security granted them the tables.

Revision ID: 0010_row_security_new_tables
Revises: 0009_agent_tools
Create Date: 2026-11-24
"""

from alembic import op

revision = "0010_row_security_new_tables"
down_revision = "0009_agent_tools"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
SYSTEM_ROLE = "memora_system"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
BY_AGENT = (
    "conversation_messages",
    "conversation_chunks",
    "conversation_index_state",
    "memory_events",
    "job_cursors",
)
BY_UNIT = {"unit_sources": "unit_id"}
TABLES = (*BY_AGENT, *BY_UNIT)


def upgrade() -> None:
    op.execute(
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {TENANT_ROLE}, {SYSTEM_ROLE}"
    )
    op.execute(
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES "
        f"TO {TENANT_ROLE}, {SYSTEM_ROLE}"
    )
    for table in BY_AGENT:
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN tenant_id TEXT NOT NULL "
            f"GENERATED ALWAYS AS (memora_key_tenant(agent_id)) STORED"
        )
    for table, unit in BY_UNIT.items():
        op.execute(
            f"""
            CREATE FUNCTION {table}_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.tenant_id := (SELECT tenant_id FROM memory_units WHERE id = NEW.{unit});
                RETURN NEW;
            END $$
            """
        )
        op.execute(f"ALTER TABLE {table} ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default'")
        op.execute(
            f"UPDATE {table} t SET tenant_id = u.tenant_id FROM memory_units u "
            f"WHERE u.id = t.{unit} AND u.tenant_id <> 'default'"
        )
        op.execute(f"ALTER TABLE {table} ALTER COLUMN tenant_id DROP DEFAULT")
        op.execute(
            f"CREATE TRIGGER {table}_tenant BEFORE INSERT OR UPDATE OF {unit} ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {table}_tenant()"
        )
        op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_tenant")
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} TO {TENANT_ROLE} "
            f"USING ({POLICY}) WITH CHECK ({POLICY})"
        )
        op.execute(f"ANALYZE {table}")


def downgrade() -> None:
    op.execute(
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE USAGE, SELECT ON SEQUENCES "
        f"FROM {TENANT_ROLE}, {SYSTEM_ROLE}"
    )
    for table in TABLES:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    for table in BY_UNIT:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_tenant ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {table}_tenant()")
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS tenant_id")
