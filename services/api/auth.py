"""Who is calling: the API key of a request, its tenant, admin rights and its rate limits.

Keys come as `Authorization: Bearer <key>` or `X-API-Key: <key>`. With MEMORA_AUTH_REQUIRED
a request without a valid key is refused (401); without it, a request with no key acts in
the "default" tenant (the embedded single-user setup), and a key, when sent, must be valid and
selects its tenant. MEMORA_ADMIN_KEY, when set, is an admin key of the "default" tenant.

Failed authentications (a missing key where one is required, an unknown, revoked or expired
key) are counted per client address (MEMORA_AUTH_FAILURE_LIMIT). An address over that limit
gets 429 with Retry-After for every request, before any key is looked up, until its window
frees: a flood of bad keys costs a Redis round trip each, not a database query.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from uuid import UUID

from fastapi import Request

from memora.basics.config import Settings
from memora.basics.tenancy import DEFAULT_SCOPE, Scope
from memora.store import tenants
from services.api.errors import APIError
from services.api.ratelimit import Limiter, failure_limiter_from_settings, limiter_from_settings

BOOTSTRAP_IDENTITY = "admin-key"


@dataclass(frozen=True)
class Principal:
    scope: Scope
    is_admin: bool = False
    key_id: UUID | None = None
    identity: str = ""  # what the rate limit counts by: the key's id, else the address


def unauthorized(message: str) -> APIError:
    return APIError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def rate_limited(message: str, wait: int) -> APIError:
    return APIError(
        429, "rate_limited", message, {"retry_after": wait}, headers={"Retry-After": str(wait)}
    )


def client_address(request: Request, settings: Settings) -> str:
    """The client's address: the last entry of the trusted proxy's header when one is
    configured and sent (the address that proxy saw), else the connection's peer."""
    if settings.trusted_proxy_header:
        forwarded = request.headers.get(settings.trusted_proxy_header, "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.client.host if request.client else "unknown"


def _limiters(request: Request) -> tuple[Limiter | None, Limiter | None]:
    """The app's per-key and failed-authentication limiters, made on first use (both apps
    share this code; neither sets them up)."""
    state = request.app.state
    if not hasattr(state, "rate_limiter"):
        state.auth_failure_limiter = failure_limiter_from_settings(state.settings)
        state.rate_limiter = limiter_from_settings(state.settings)
    return state.rate_limiter, state.auth_failure_limiter


def _identify(request: Request, settings: Settings, key: str | None, address: str) -> Principal:
    """The caller; raises 401 (`unauthorized`) when authentication fails."""
    if not key:
        if settings.auth_required:
            raise unauthorized(
                "an API key is required: send `Authorization: Bearer <key>` or `X-API-Key`"
            )
        return Principal(DEFAULT_SCOPE, identity=f"address:{address}")
    admin_key = settings.admin_key.get_secret_value() if settings.admin_key else None
    if admin_key is not None and hmac.compare_digest(key.encode(), admin_key.encode()):
        return Principal(DEFAULT_SCOPE, is_admin=True, identity=BOOTSTRAP_IDENTITY)
    with request.app.state.pool.connection() as conn:  # keys of every tenant: cross-tenant
        owner = tenants.resolve_key(conn, key)
    if owner is None:
        raise unauthorized("the API key is unknown or revoked")
    if owner.expired:
        raise unauthorized(f"the API key expired at {owner.expires_at:%Y-%m-%dT%H:%M:%SZ}")
    return Principal(
        Scope(owner.tenant_id), owner.is_admin, owner.key_id, identity=f"key:{owner.key_id}"
    )


def _too_many_failures(failures: Limiter, address: str, wait: int) -> APIError:
    return rate_limited(
        f"too many failed authentications from {address} ({failures.describe()}); "
        f"retry in {wait} s",
        wait,
    )


def identify(request: Request, key: str | None) -> Principal:
    """The caller of `request`; failed authentications count against the client address's
    budget (429 when over it). Not counted against the per-key rate limit: for endpoints (MCP)
    whose work is done, and counted, by the routes they call."""
    settings: Settings = request.app.state.settings
    _, failures = _limiters(request)
    address = client_address(request, settings)
    if failures is not None and (key or settings.auth_required):
        wait = failures.exhausted(address)
        if wait is not None:
            raise _too_many_failures(failures, address, wait)
    try:
        return _identify(request, settings, key, address)
    except APIError:
        if failures is not None and (wait := failures.retry_after(address)) is not None:
            raise _too_many_failures(failures, address, wait) from None
        raise


def authenticate(request: Request, key: str | None) -> Principal:
    """The caller of `request` (see `identify`), counted against its rate limit (429 when
    over it)."""
    principal = identify(request, key)
    limiter, _ = _limiters(request)
    if limiter is not None:
        wait = limiter.retry_after(principal.identity)
        if wait is not None:
            message = f"rate limit exceeded ({limiter.describe()}); retry in {wait} s"
            raise rate_limited(message, wait)
    return principal
