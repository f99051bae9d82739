"""Who is calling: the API key of a request, its tenant, admin rights and its rate limit.

Keys come as `Authorization: Bearer <key>` or `X-API-Key: <key>`. With MEMORA_AUTH_REQUIRED
a request without a valid key is refused (401); without it, a request with no key acts in
the "default" tenant (the embedded single-user setup), and a key, when sent, must be valid and
selects its tenant. MEMORA_ADMIN_KEY, when set, is an admin key of the "default" tenant.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from uuid import UUID

from fastapi import Request

from memora.config import Settings
from memora.store import tenants
from memora.tenancy import DEFAULT_SCOPE, Scope
from services.api.errors import APIError
from services.api.ratelimit import Limiter, limiter_from_settings

BOOTSTRAP_IDENTITY = "admin-key"


@dataclass(frozen=True)
class Principal:
    scope: Scope
    is_admin: bool = False
    key_id: UUID | None = None
    identity: str = ""  # what the rate limit counts by: the key's id, else the address


def unauthorized(message: str) -> APIError:
    return APIError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def _limiter(request: Request) -> Limiter | None:
    """The app's limiter, made on first use (both apps share this code; neither sets it up)."""
    state = request.app.state
    if not hasattr(state, "rate_limiter"):
        state.rate_limiter = limiter_from_settings(state.settings)
    limiter: Limiter | None = state.rate_limiter
    return limiter


def _identify(request: Request, settings: Settings, key: str | None) -> Principal:
    if not key:
        if settings.auth_required:
            raise unauthorized(
                "an API key is required: send `Authorization: Bearer <key>` or `X-API-Key`"
            )
        address = request.client.host if request.client else "unknown"
        return Principal(DEFAULT_SCOPE, identity=f"address:{address}")
    admin_key = settings.admin_key.get_secret_value() if settings.admin_key else None
    if admin_key is not None and hmac.compare_digest(key.encode(), admin_key.encode()):
        return Principal(DEFAULT_SCOPE, is_admin=True, identity=BOOTSTRAP_IDENTITY)
    with request.app.state.pool.connection() as conn:
        owner = tenants.resolve_key(conn, key)
    if owner is None:
        raise unauthorized("the API key is unknown or revoked")
    return Principal(
        Scope(owner.tenant_id), owner.is_admin, owner.key_id, identity=f"key:{owner.key_id}"
    )


def identify(request: Request, key: str | None) -> Principal:
    """The caller of `request`, not counted against its rate limit: for endpoints (MCP) whose
    work is done, and counted, by the routes they call."""
    return _identify(request, request.app.state.settings, key)


def authenticate(request: Request, key: str | None) -> Principal:
    """The caller of `request`, counted against its rate limit (429 when over it)."""
    principal = _identify(request, request.app.state.settings, key)
    limiter = _limiter(request)
    if limiter is not None:
        wait = limiter.retry_after(principal.identity)
        if wait is not None:
            raise APIError(
                429,
                "rate_limited",
                f"rate limit exceeded ({limiter.describe()}); retry in {wait} s",
                {"retry_after": wait},
                headers={"Retry-After": str(wait)},
            )
    return principal
