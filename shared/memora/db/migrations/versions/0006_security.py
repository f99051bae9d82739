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
- Every tenant-scoped table has a `tenant_id` column and gets ENABLE + FORCE ROW LEVEL
  SECURITY (so a table owner that is not a superuser is confined too: with no policy for it,
  it sees nothing until it takes one of the two roles) and the policy `tenant_isolation`:
  `tenant_id = (SELECT current_setting('memora.tenant', true))`. A plain column compared
  with a value computed once per query (the sub-select) costs one comparison per row, is
  estimated from the column's statistics (1/number of tenants) and never stands in the way
  of an index: a per-row derivation from the agent key (strpos, split_part) cost a function
  call on each of the keyword retriever's matches, and its default selectivity made the
  planner trade the HNSW index for a sequential scan (docs/benchmarks-history.md,
  "Row-level security").
  - `agents`, `api_keys`, `tenants` have the column already.
  - Tables keyed by an agent (`documents`, `operations`, `memory_units`, `memory_search`,
    `entities`): a stored generated column, `memora_key_tenant(agent_id)` (the tenant of a
    stored agent key, memora.basics.tenancy.Scope). Adding it rewrites these tables once.
  - Tables keyed by a unit (`memory_links` by its `from_unit`, `unit_entities`,
    `memory_access`): filled from the unit's row by a BEFORE INSERT trigger (ENABLE ALWAYS,
    so also for replicated or bulk-loaded rows); existing rows take the fast default
    'default' and the others are updated. `idx_memory_links_strongest` includes it, so the
    graph retriever's steps stay index-only scans.
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
POLICY = "tenant_id = (SELECT current_setting('memora.tenant', true))"
HAS_TENANT = ("tenants", "api_keys", "agents")
BY_AGENT = ("documents", "operations", "memory_units", "memory_search", "entities")
BY_UNIT = {"memory_links": "from_unit", "unit_entities": "unit_id", "memory_access": "unit_id"}
TABLES = (*HAS_TENANT, *BY_AGENT, *BY_UNIT)


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
    op.execute("DROP INDEX IF EXISTS idx_memory_links_strongest")
    op.execute(
        "CREATE INDEX idx_memory_links_strongest ON memory_links "
        "(from_unit, weight DESC, to_unit) INCLUDE (link_type, tenant_id)"
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} TO {TENANT_ROLE} "
            f"USING ({POLICY}) WITH CHECK ({POLICY})"
        )
    for table in (*BY_AGENT, *BY_UNIT):  # statistics of the new column, for the planner
        op.execute(f"ANALYZE {table}")
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
    for table in TABLES:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP INDEX IF EXISTS idx_memory_links_strongest")
    op.execute(
        "CREATE INDEX idx_memory_links_strongest ON memory_links "
        "(from_unit, weight DESC, to_unit) INCLUDE (link_type)"
    )
    for table in BY_UNIT:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_tenant ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {table}_tenant()")
    for table in (*BY_AGENT, *BY_UNIT):
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS tenant_id")
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
