"""Admin: tenants, their API keys, queues and workers (docs/security.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Self
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from memora.usecases import tenants
from memora.usecases.agents import Erasure
from memora.usecases.tenants import NewKey
from services.api.schemas.agents import ErasureReceipt

TenantId = Annotated[str, Field(pattern=tenants.TENANT_ID_PATTERN)]
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


class TenantDeleted(ErasureReceipt):
    tenant_id: str

    @classmethod
    def of(cls, tenant_id: str, erasure: Erasure) -> TenantDeleted:
        return cls(tenant_id=tenant_id, **cls.fields_of(erasure))


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


class ApiKey(BaseModel):
    id: UUID
    tenant_id: str
    prefix: str = Field(description="the start of the key, to recognise it by")
    name: str
    admin: bool
    created_at: datetime
    expires_at: datetime | None = Field(default=None, description="none: it does not expire")
    revoked_at: datetime | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> ApiKey:
        return cls.model_validate({**row, "admin": row["is_admin"]})


class NewApiKey(ApiKey):
    key: str = Field(description="the secret key; shown this once, only its hash is stored")

    @classmethod
    def of_new(cls, new: NewKey) -> NewApiKey:
        return cls(
            id=new.id,
            tenant_id=new.tenant_id,
            prefix=new.prefix,
            name=new.name,
            admin=new.is_admin,
            created_at=new.created_at,
            expires_at=new.expires_at,
            key=new.key,
        )


class KeyList(BaseModel):
    keys: list[ApiKey]


class Worker(BaseModel):
    name: str
    queues: list[str]


class QueuesAndWorkers(BaseModel):
    queues: dict[str, int] = Field(description="messages waiting per queue")
    oldest_seconds: dict[str, float] = Field(
        description="how long the oldest message waiting in each queue has waited (0: none); "
        "growing while no worker is busy is a stall"
    )
    workers: list[Worker] = Field(description="workers that answered within a second")


class EmbeddingGeneration(BaseModel):
    id: int
    provider: str
    model: str
    dim: int
    base_url: str | None = None


class ReembedProgress(BaseModel):
    units: int
    units_done: int
    chunks: int
    chunks_done: int


class EmbeddingGenerations(BaseModel):
    """The embedding model of the stored vectors and a `memora reembed` under way."""

    live: EmbeddingGeneration
    building: EmbeddingGeneration | None = None
    progress: ReembedProgress | None = None
    retired_columns_left: bool = Field(
        description="a switch's old columns are still to drop (`memora reembed` drops them)"
    )
