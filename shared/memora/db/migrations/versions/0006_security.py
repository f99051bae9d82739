"""Security: API keys may expire; tenant isolation enforced again by row-level security.

- `api_keys.expires_at`: optional; a key past it is refused (401) like a revoked one.
- Two roles the application switches to (`SET ROLE`; the login role is made a member):
  `memora_tenant` for work on behalf of one tenant, which sees and writes only the rows of
  the tenant named by the `memora.tenant` setting, and `memora_system` (BYPASSRLS) for work
  that crosses tenants on purpose: the pipeline workers, key lookup, tenant administration,
  maintenance. (It bypasses rather than passing a policy: COPY, which the pipeline writes
  with, is refused on tables under row-level security.) Superusers bypass RLS too, which is
  why the application never does tenant work as its login role. Creating a BYPASSRLS role
  needs a superuser (or a migrating role that has BYPASSRLS itself); a DBA can create both
  roles beforehand, and the migration then only grants them.
- Every tenant-scoped table gets ENABLE + FORCE ROW LEVEL SECURITY (so a table owner that is
  not a superuser is confined too: with no policy for it, it sees nothing until it takes one
  of the two roles) and the policy `tenant_isolation`. The tenant of a row: `tenant_id` where
  the table has it; else the tenant of its stored agent key (`memora_key_tenant(agent_id)`,
  memora.tenancy.Scope); tables keyed by a unit alone (links, entity mentions, access
  counts) follow their unit in `memory_units`, whose own policy then applies.
- `ts_match_vq` (tsvector @@ tsquery) is declared LEAKPROOF when the migrating role is a
  superuser. PostgreSQL evaluates a non-leakproof condition of a query only after the row
  policies, so it cannot be an index condition: keyword search would then read every unit of
  the agent through the GIN index on agent_id alone. It raises no errors that depend on the
  rows' contents, so it leaks nothing the policies hide. Without superuser rights this step
  is skipped with a notice (keyword search stays correct, only slower).

Revision ID: 0006_security
Revises: 0005_narrow_reads
Create Date: 2026-11-24
"""

from alembic import op

revision = "0006_security"
down_revision = "0005_narrow_reads"
branch_labels = None
depends_on = None

TENANT_ROLE = "memora_tenant"
SYSTEM_ROLE = "memora_system"
SETTING = "current_setting('memora.tenant', true)"
# table -> the condition naming the row's tenant as the `memora.tenant` setting
POLICIES = {
    "tenants": f"tenant_id = {SETTING}",
    "api_keys": f"tenant_id = {SETTING}",
    "agents": f"tenant_id = {SETTING}",
    "documents": f"memora_key_tenant(agent_id) = {SETTING}",
    "operations": f"memora_key_tenant(agent_id) = {SETTING}",
    "memory_units": f"memora_key_tenant(agent_id) = {SETTING}",
    "memory_search": f"memora_key_tenant(agent_id) = {SETTING}",
    "entities": f"memora_key_tenant(agent_id) = {SETTING}",
    "memory_links": "EXISTS (SELECT 1 FROM memory_units u WHERE u.id = memory_links.from_unit)",
    "unit_entities": "EXISTS (SELECT 1 FROM memory_units u WHERE u.id = unit_entities.unit_id)",
    "memory_access": "EXISTS (SELECT 1 FROM memory_units u WHERE u.id = memory_access.unit_id)",
}


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN expires_at TIMESTAMPTZ")
    # roles belong to the cluster: another database of it may have made them already
    for role, bypass in ((TENANT_ROLE, "NOBYPASSRLS"), (SYSTEM_ROLE, "BYPASSRLS")):
        op.execute(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') "
            f"THEN CREATE ROLE {role} NOLOGIN {bypass}; END IF; END $$"
        )
        op.execute(f"GRANT {role} TO CURRENT_USER")
    op.execute(f"GRANT USAGE ON SCHEMA public TO {TENANT_ROLE}, {SYSTEM_ROLE}")
    op.execute(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public "
        f"TO {TENANT_ROLE}, {SYSTEM_ROLE}"
    )
    op.execute(
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE "
        f"ON TABLES TO {TENANT_ROLE}, {SYSTEM_ROLE}"
    )
    op.execute(
        """
        CREATE FUNCTION memora_key_tenant(agent_key text) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN
            CASE WHEN strpos(agent_key, '/') = 0 THEN 'default'
                 ELSE split_part(agent_key, '/', 1) END
        """
    )
    for table, condition in POLICIES.items():
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} TO {TENANT_ROLE} "
            f"USING ({condition}) WITH CHECK ({condition})"
        )
    op.execute(
        """
        DO $$ BEGIN
            IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF;
            ELSE
                RAISE NOTICE 'not a superuser: ts_match_vq stays non-leakproof, so keyword '
                    'search under row-level security cannot use its GIN index on the query';
            END IF;
        END $$
        """
    )


def downgrade() -> None:
    op.execute(
        "DO $$ BEGIN IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN "
        "ALTER FUNCTION ts_match_vq(tsvector, tsquery) NOT LEAKPROOF; END IF; END $$"
    )
    for table in POLICIES:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP FUNCTION IF EXISTS memora_key_tenant(text)")
    op.execute(
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT, INSERT, UPDATE, DELETE "
        f"ON TABLES FROM {TENANT_ROLE}, {SYSTEM_ROLE}"
    )
    op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {TENANT_ROLE}, {SYSTEM_ROLE}")
    op.execute(f"REVOKE ALL ON SCHEMA public FROM {TENANT_ROLE}, {SYSTEM_ROLE}")
    for role in (TENANT_ROLE, SYSTEM_ROLE):  # kept while another database still uses it
        op.execute(
            f"DO $$ BEGIN DROP ROLE IF EXISTS {role}; "
            f"EXCEPTION WHEN dependent_objects_still_exist THEN "
            f"RAISE NOTICE 'role {role} is still used elsewhere; kept'; END $$"
        )
    op.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS expires_at")
