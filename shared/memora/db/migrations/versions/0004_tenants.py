"""Tenants and API keys; every agent belongs to one tenant.

- `tenants`: one row per tenant; "default" (the embedded single-user setup, auth off) always
  exists and owns every agent created before this revision.
- `api_keys`: only the SHA-256 of each secret key is stored (`key_hash`, unique: keys are
  looked up by it), with a short `prefix` to recognise it by. Revoked keys keep their row.
- `agents.tenant_id`: the owner. The CHECK ties it to the stored agent key, which is the
  client's agent id for "default" and "<tenant>/<agent id>" for any other tenant
  (memora.basics.tenancy.Scope), so no row can claim an agent of another tenant's namespace.

Revision ID: 0004_tenants
Revises: 0003_read_path
Create Date: 2026-11-26
"""

from alembic import op

revision = "0004_tenants"
down_revision = "0003_read_path"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE tenants (
            tenant_id  TEXT PRIMARY KEY CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$'),
            name       TEXT NOT NULL DEFAULT '',
            created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("INSERT INTO tenants (tenant_id, name) VALUES ('default', 'default')")
    op.execute(
        """
        CREATE TABLE api_keys (
            id         UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id  TEXT NOT NULL REFERENCES tenants(tenant_id) ON DELETE CASCADE,
            key_hash   TEXT NOT NULL UNIQUE,
            prefix     TEXT NOT NULL,
            name       TEXT NOT NULL DEFAULT '',
            is_admin   BOOLEAN NOT NULL DEFAULT false,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            revoked_at TIMESTAMPTZ
        )
        """
    )
    op.execute("CREATE INDEX idx_api_keys_tenant ON api_keys (tenant_id)")
    op.execute(
        "ALTER TABLE agents ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default' "
        "REFERENCES tenants(tenant_id)"
    )
    op.execute(
        """
        ALTER TABLE agents ADD CONSTRAINT agents_key_in_tenant CHECK (
            CASE WHEN tenant_id = 'default' THEN strpos(agent_id, '/') = 0
                 ELSE starts_with(agent_id, tenant_id || '/') END)
        """
    )
    op.execute("CREATE INDEX idx_agents_tenant ON agents (tenant_id, agent_id)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_agents_tenant")
    op.execute("ALTER TABLE agents DROP CONSTRAINT IF EXISTS agents_key_in_tenant")
    op.execute("ALTER TABLE agents DROP COLUMN IF EXISTS tenant_id")
    op.execute("DROP TABLE IF EXISTS api_keys")
    op.execute("DROP TABLE IF EXISTS tenants")
