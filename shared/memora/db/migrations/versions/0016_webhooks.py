"""Webhooks (issue 27): endpoints a tenant registers, and the outbox of their deliveries.

- `webhooks`: one row per endpoint: its tenant, URL, the event types it takes, a description
  and its signing secret (`whsec_...`). The secret must be stored as it is to sign with it (a
  hash would not do); the API shows it once, at creation, and never lists it.
- `webhook_deliveries`: one row per event and endpoint, inserted in the transaction of what it
  reports (the outbox). `event_id` is sent as `webhook-id` (the same on every attempt),
  `payload` is the JSON body. `status` pending -> succeeded | failed; `attempts`,
  `next_attempt_at` (the back-off), `claimed_until` (a sender holds it while it sends),
  `dispatched_at` (when a task was last sent for it: the sweep sends another only when that
  one looks lost), the last answer (`last_status_code`, `last_response`, `last_error`).

Both tables carry `tenant_id` under row-level security (the `tenant_isolation` policy).

Revision ID: 0016_webhooks
Revises: 0015_validity
Create Date: 2026-11-26
"""

from alembic import op

revision = "0016_webhooks"
down_revision = "0015_validity"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
TABLES = ("webhooks", "webhook_deliveries")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE webhooks (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id TEXT NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
            url TEXT NOT NULL,
            events TEXT[] NOT NULL,
            description TEXT NOT NULL DEFAULT '',
            secret TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX webhooks_tenant ON webhooks (tenant_id, created_at)")
    op.execute(
        """
        CREATE TABLE webhook_deliveries (
            id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
            webhook_id UUID NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
            tenant_id TEXT NOT NULL,
            event_type TEXT NOT NULL,
            event_id TEXT NOT NULL,
            payload JSONB NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'succeeded', 'failed')),
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            claimed_until TIMESTAMPTZ,
            dispatched_at TIMESTAMPTZ DEFAULT now(),
            last_status_code INTEGER,
            last_response TEXT,
            last_error TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            UNIQUE (webhook_id, event_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (webhook_id, created_at)"
    )
    op.execute(
        "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) "
        "WHERE status = 'pending'"
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} TO {TENANT_ROLE} "
            f"USING ({POLICY}) WITH CHECK ({POLICY})"
        )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS webhook_deliveries")
    op.execute("DROP TABLE IF EXISTS webhooks")
