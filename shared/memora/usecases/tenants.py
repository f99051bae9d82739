"""Tenants and their API keys, for administrators (the API's admin routes; docs/security.md).
Each call owns its transaction; refusals are typed (Conflict, NotFound, Invalid)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.errors import Conflict, Invalid, NotFound
from memora.basics.models import utcnow
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.store import agents, tenants
from memora.store.tenants import NewKey as NewKey
from memora.usecases.agents import Erasure, erasure_receipt

TENANT_ID_PATTERN = tenants.TENANT_ID_PATTERN  # a tenant id's form


def create_tenant(
    app: AppContext, conn: Connection[Any], tenant_id: str, name: str = ""
) -> dict[str, Any]:
    try:
        with conn.transaction():
            return tenants.create_tenant(conn, tenant_id, name)
    except tenants.TenantExists as exc:
        raise Conflict("conflict", f"tenant {tenant_id} already exists") from exc


def list_tenants(app: AppContext, conn: Connection[Any]) -> list[dict[str, Any]]:
    return tenants.list_tenants(conn)


def delete_tenant(app: AppContext, conn: Connection[Any], tenant_id: str) -> Erasure:
    """Hard delete of all the tenant's agents and their data, its keys, and the tenant (the
    "default" tenant is emptied but stays); zero counts when it is gone already. With the
    receipt of its agents' erasure."""
    with conn.transaction():
        keys = agents.tenant_agent_keys(conn, Scope(tenant_id))
        return erasure_receipt(conn, tenants.delete_tenant(conn, tenant_id), keys)


def create_key(
    app: AppContext,
    conn: Connection[Any],
    tenant_id: str,
    *,
    admin: bool = False,
    name: str = "",
    expires_at: datetime | None = None,
    expires_in: str | None = None,
) -> NewKey:
    """A new key of the tenant (its secret is in the result, never stored), working until
    `expires_at`, or for `expires_in` ("30d", "12h", "2w") from now. Invalid for a duration
    that is not positive or an expiry in the past."""
    try:
        if expires_in is not None:
            expires_at = utcnow() + tenants.parse_duration(expires_in)
        with conn.transaction():
            return tenants.create_key(
                conn, tenant_id, is_admin=admin, name=name, expires_at=expires_at
            )
    except tenants.UnknownTenant as exc:
        raise NotFound("not_found", f"tenant {tenant_id} not found") from exc
    except ValueError as exc:  # an expiry in the past, a zero duration
        raise Invalid("validation_error", str(exc)) from exc


def list_keys(app: AppContext, conn: Connection[Any], tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's keys, revoked ones included; never the keys themselves."""
    return tenants.list_keys(conn, tenant_id)


def revoke_key(app: AppContext, conn: Connection[Any], key_id: UUID) -> dict[str, Any]:
    """The key stops working at once; revoking it again changes nothing."""
    with conn.transaction():
        row = tenants.revoke_key(conn, key_id)
    if row is None:
        raise NotFound("not_found", f"API key {key_id} not found")
    return row
