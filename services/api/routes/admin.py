"""Admin routes: tenants and their API keys (admin keys only; docs/security.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Self
from uuid import UUID

from fastapi import APIRouter, Path
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from memora.basics.models import utcnow
from memora.store import tenants
from services.api.deps import AdminDep, SystemConnDep
from services.api.errors import AUTH_ERRORS, BODY_ERRORS, APIError, error_responses

router = APIRouter(
    prefix="/api/admin", tags=["admin"], responses=error_responses(*AUTH_ERRORS, 403, 422, 503)
)
TenantId = Annotated[str, Field(pattern=tenants.TENANT_ID_PATTERN)]
TenantPath = Annotated[str, Path(pattern=tenants.TENANT_ID_PATTERN)]
Label = Annotated[str, Field(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")]


class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_id: TenantId
    name: Label = ""


class Tenant(BaseModel):
    tenant_id: str
    name: str
    created_at: datetime
    agents: int = 0
    keys: int = Field(default=0, description="active (not revoked) keys")


class TenantList(BaseModel):
    tenants: list[Tenant]


class TenantDeleted(BaseModel):
    success: bool
    tenant_id: str
    deleted: dict[str, int] = Field(description="rows removed, per table")


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Label = ""
    admin: bool = Field(default=False, description="may manage tenants and keys")
    expires_at: AwareDatetime | None = Field(
        default=None, description="when the key stops working (ISO 8601 with a time zone)"
    )
    expires_in: str | None = Field(
        default=None,
        pattern=r"^[0-9]{1,6}[smhdw]$",
        description='or how long it works from now: e.g. "30d", "12h", "2w"',
        examples=["30d"],
    )

    @model_validator(mode="after")
    def _one_expiry(self) -> Self:
        if self.expires_at is not None and self.expires_in is not None:
            raise ValueError("give expires_at or expires_in, not both")
        return self

    def expiry(self, now: datetime) -> datetime | None:
        if self.expires_in is not None:
            return now + tenants.parse_duration(self.expires_in)
        return self.expires_at


class ApiKey(BaseModel):
    id: UUID
    tenant_id: str
    prefix: str = Field(description="the start of the key, to recognise it by")
    name: str
    admin: bool
    created_at: datetime
    expires_at: datetime | None = Field(default=None, description="none: it does not expire")
    revoked_at: datetime | None = None


class NewApiKey(ApiKey):
    key: str = Field(description="the secret key; shown this once, only its hash is stored")


class KeyList(BaseModel):
    keys: list[ApiKey]


def _key(row: dict[str, object]) -> ApiKey:
    return ApiKey.model_validate({**row, "admin": row["is_admin"]})


@router.post(
    "/tenants", status_code=201, response_model=Tenant, responses=error_responses(*BODY_ERRORS, 409)
)
def create_tenant(_: AdminDep, body: TenantCreate, conn: SystemConnDep) -> Tenant:
    try:
        with conn.transaction():
            row = tenants.create_tenant(conn, body.tenant_id, body.name)
    except tenants.TenantExists as exc:
        raise APIError(409, "conflict", f"tenant {body.tenant_id} already exists") from exc
    return Tenant.model_validate(row)


@router.get("/tenants", response_model=TenantList)
def list_tenants(_: AdminDep, conn: SystemConnDep) -> TenantList:
    return TenantList(tenants=[Tenant.model_validate(r) for r in tenants.list_tenants(conn)])


@router.delete("/tenants/{tenant_id}", response_model=TenantDeleted)
def delete_tenant(_: AdminDep, tenant_id: TenantPath, conn: SystemConnDep) -> TenantDeleted:
    """Hard delete of all the tenant's agents and their data, its keys, and the tenant (the
    "default" tenant is emptied but stays). Deleting it again succeeds with zero counts."""
    with conn.transaction():
        deleted = tenants.delete_tenant(conn, tenant_id)
    return TenantDeleted(success=True, tenant_id=tenant_id, deleted=deleted)


@router.post(
    "/tenants/{tenant_id}/keys",
    status_code=201,
    response_model=NewApiKey,
    responses=error_responses(*BODY_ERRORS, 404),
)
def create_key(
    _: AdminDep, tenant_id: TenantPath, body: KeyCreate, conn: SystemConnDep
) -> NewApiKey:
    """A new key, shown once; with `expires_at` or `expires_in` it stops working then (401)."""
    try:
        with conn.transaction():
            new = tenants.create_key(
                conn,
                tenant_id,
                is_admin=body.admin,
                name=body.name,
                expires_at=body.expiry(utcnow()),
            )
    except tenants.UnknownTenant as exc:
        raise APIError(404, "not_found", f"tenant {tenant_id} not found") from exc
    except ValueError as exc:  # an expiry in the past
        raise APIError(422, "validation_error", str(exc)) from exc
    return NewApiKey(
        id=new.id,
        tenant_id=new.tenant_id,
        prefix=new.prefix,
        name=new.name,
        admin=new.is_admin,
        created_at=new.created_at,
        expires_at=new.expires_at,
        key=new.key,
    )


@router.get("/tenants/{tenant_id}/keys", response_model=KeyList)
def list_keys(_: AdminDep, tenant_id: TenantPath, conn: SystemConnDep) -> KeyList:
    """The tenant's keys, revoked ones included; never the keys themselves."""
    return KeyList(keys=[_key(r) for r in tenants.list_keys(conn, tenant_id)])


@router.delete("/keys/{key_id}", response_model=ApiKey, responses=error_responses(404))
def revoke_key(_: AdminDep, key_id: UUID, conn: SystemConnDep) -> ApiKey:
    """Revoke: the key stops working at once. Revoking it again changes nothing."""
    with conn.transaction():
        row = tenants.revoke_key(conn, key_id)
    if row is None:
        raise APIError(404, "not_found", f"API key {key_id} not found")
    return _key(row)
