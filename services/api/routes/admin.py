"""Admin routes: tenants and their API keys (admin keys only; docs/security.md)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path

from memora.usecases import reembed, tenants
from memora.usecases.tenants import TENANT_ID_PATTERN
from services.api.deps import AdminDep, ContextDep, SystemConnDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, error_responses
from services.api.schemas.admin import (
    ApiKey,
    EmbeddingGenerations,
    KeyCreate,
    KeyList,
    NewApiKey,
    Tenant,
    TenantCreate,
    TenantDeleted,
    TenantList,
)

router = APIRouter(
    prefix="/api/admin", tags=["admin"], responses=error_responses(*AUTH_ERRORS, 403, 422, 503)
)
TenantPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN)]


@router.post(
    "/tenants", status_code=201, response_model=Tenant, responses=error_responses(*BODY_ERRORS, 409)
)
def create_tenant(
    _: AdminDep, body: TenantCreate, conn: SystemConnDep, context: ContextDep
) -> Tenant:
    return Tenant.model_validate(tenants.create_tenant(context, conn, body.tenant_id, body.name))


@router.get("/tenants", response_model=TenantList)
def list_tenants(_: AdminDep, conn: SystemConnDep, context: ContextDep) -> TenantList:
    return TenantList(
        tenants=[Tenant.model_validate(r) for r in tenants.list_tenants(context, conn)]
    )


@router.delete("/tenants/{tenant_id}", response_model=TenantDeleted)
def delete_tenant(
    _: AdminDep, tenant_id: TenantPath, conn: SystemConnDep, context: ContextDep
) -> TenantDeleted:
    """Hard delete of all the tenant's agents and their data, its keys, and the tenant (the
    "default" tenant is emptied but stays). Deleting it again succeeds with zero counts."""
    return TenantDeleted.of(tenant_id, tenants.delete_tenant(context, conn, tenant_id))


@router.post(
    "/tenants/{tenant_id}/keys",
    status_code=201,
    response_model=NewApiKey,
    responses=error_responses(*BODY_ERRORS, 404),
)
def create_key(
    _: AdminDep, tenant_id: TenantPath, body: KeyCreate, conn: SystemConnDep, context: ContextDep
) -> NewApiKey:
    """A new key, shown once; with `expires_at` or `expires_in` it stops working then (401)."""
    new = tenants.create_key(
        context, conn, tenant_id, admin=body.admin, name=body.name, expires_at=body.expires_at,
        expires_in=body.expires_in,
    )  # fmt: skip
    return NewApiKey.of_new(new)


@router.get("/tenants/{tenant_id}/keys", response_model=KeyList)
def list_keys(
    _: AdminDep, tenant_id: TenantPath, conn: SystemConnDep, context: ContextDep
) -> KeyList:
    """The tenant's keys, revoked ones included; never the keys themselves."""
    return KeyList(keys=[ApiKey.of(r) for r in tenants.list_keys(context, conn, tenant_id)])


@router.delete("/keys/{key_id}", response_model=ApiKey, responses=error_responses(404))
def revoke_key(_: AdminDep, key_id: UUID, conn: SystemConnDep, context: ContextDep) -> ApiKey:
    """Revoke: the key stops working at once. Revoking it again changes nothing."""
    return ApiKey.of(tenants.revoke_key(context, conn, key_id))


@router.get("/embedding-generations", response_model=EmbeddingGenerations)
def embedding_generations(
    _: AdminDep, conn: SystemConnDep, context: ContextDep
) -> EmbeddingGenerations:
    """`memora reembed --status`: the live embedding model, and a reembed's progress."""
    return EmbeddingGenerations.model_validate(reembed.status_on(conn, context.settings))
