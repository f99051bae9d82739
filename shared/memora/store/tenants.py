"""Tenants and their API keys.

A key is `mk_` + 32 random bytes (URL-safe base64), shown once when it is made. Only its
SHA-256 is stored and a key is found by that hash: with 256 bits of entropy a fast unsalted
hash is safe (nothing can be guessed, so nothing is gained by a slow one), and an indexed
equality lookup on the hash leaks nothing useful through timing.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from psycopg import Connection, errors

from memora.basics.tenancy import DEFAULT_TENANT, Scope
from memora.store.agents import delete_all_agents

# The characters of agent ids (memora.basics.models.AGENT_ID_PATTERN), never "/", at most 64.
TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$"
KEY_MARK = "mk_"
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
PREFIX_CHARS = len(KEY_MARK) + 8  # shown to tell keys apart; 48 of the 256 bits


class TenantExists(Exception):
    pass


class UnknownTenant(Exception):
    pass


@dataclass(frozen=True)
class KeyOwner:
    """Who a presented key belongs to."""

    key_id: UUID
    tenant_id: str
    is_admin: bool
    expires_at: datetime | None = None
    expired: bool = False


@dataclass(frozen=True)
class NewKey:
    id: UUID
    tenant_id: str
    key: str  # the secret itself: shown once, never stored
    prefix: str
    name: str
    is_admin: bool
    created_at: datetime
    expires_at: datetime | None = None


def is_valid_tenant_id(tenant_id: str) -> bool:
    return re.fullmatch(TENANT_ID_PATTERN, tenant_id) is not None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def generate_key() -> str:
    return KEY_MARK + secrets.token_urlsafe(32)


def parse_duration(text: str) -> timedelta:
    """ "30d", "12h", "90m", "3600s" or "2w" as a positive timedelta; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*([smhdw])\s*", text)
    if match is None or int(match[1]) == 0:
        raise ValueError(f"invalid duration {text!r}: a positive number and s, m, h, d or w")
    return timedelta(seconds=int(match[1]) * DURATION_UNITS[match[2]])


# ------------------------------------------------------------------------------ tenants
def create_tenant(conn: Connection[Any], tenant_id: str, name: str = "") -> dict[str, Any]:
    if not is_valid_tenant_id(tenant_id):
        raise ValueError(f"invalid tenant id {tenant_id!r}: {TENANT_ID_PATTERN}")
    row = conn.execute(
        "INSERT INTO tenants (tenant_id, name) VALUES (%s, %s) ON CONFLICT (tenant_id) DO NOTHING "
        "RETURNING tenant_id, name, created_at",
        (tenant_id, name or tenant_id),
    ).fetchone()
    if row is None:
        raise TenantExists(tenant_id)
    created: dict[str, Any] = row
    return created


def list_tenants(conn: Connection[Any]) -> list[dict[str, Any]]:
    """Every tenant with its number of agents and of active keys."""
    return conn.execute(
        """
        SELECT t.tenant_id, t.name, t.created_at,
               (SELECT count(*) FROM agents a WHERE a.tenant_id = t.tenant_id) AS agents,
               (SELECT count(*) FROM api_keys k
                WHERE k.tenant_id = t.tenant_id AND k.revoked_at IS NULL
                  AND (k.expires_at IS NULL OR k.expires_at > now())) AS keys
        FROM tenants t ORDER BY t.tenant_id
        """
    ).fetchall()


def delete_tenant(conn: Connection[Any], tenant_id: str) -> dict[str, int]:
    """Hard delete of all the tenant's data and keys, then of the tenant; the reserved default
    tenant is emptied but stays. Zero counts for a tenant that does not exist."""
    # Locked first: agents being created for the tenant now are waited for, later ones wait.
    conn.execute("SELECT 1 FROM tenants WHERE tenant_id = %s FOR UPDATE", (tenant_id,))
    counts = delete_all_agents(conn, Scope(tenant_id))
    counts["api_keys"] = conn.execute(
        "DELETE FROM api_keys WHERE tenant_id = %s", (tenant_id,)
    ).rowcount
    counts["tenants"] = (
        0
        if tenant_id == DEFAULT_TENANT
        else conn.execute("DELETE FROM tenants WHERE tenant_id = %s", (tenant_id,)).rowcount
    )
    return counts


# ------------------------------------------------------------------------------ keys
def create_key(
    conn: Connection[Any],
    tenant_id: str,
    *,
    is_admin: bool = False,
    name: str = "",
    expires_at: datetime | None = None,
) -> NewKey:
    """A new key; `expires_at` (optional) must be in the future (ValueError otherwise)."""
    key = generate_key()
    try:
        row = conn.execute(
            "INSERT INTO api_keys (tenant_id, key_hash, prefix, name, is_admin, expires_at) "
            "SELECT %(t)s, %(h)s, %(p)s, %(n)s, %(a)s, %(e)s "
            "WHERE %(e)s::timestamptz IS NULL OR %(e)s::timestamptz > now() "
            "RETURNING id, created_at",
            {
                "t": tenant_id,
                "h": hash_key(key),
                "p": key[:PREFIX_CHARS],
                "n": name,
                "a": is_admin,
                "e": expires_at,
            },
        ).fetchone()
    except errors.ForeignKeyViolation as exc:
        raise UnknownTenant(tenant_id) from exc
    if row is None:
        raise ValueError(f"the expiry {expires_at} is not in the future")
    return NewKey(
        row["id"], tenant_id, key, key[:PREFIX_CHARS], name, is_admin, row["created_at"], expires_at
    )


def list_keys(conn: Connection[Any], tenant_id: str | None = None) -> list[dict[str, Any]]:
    """Keys (never their hashes), of one tenant or of all, revoked ones included."""
    return conn.execute(
        "SELECT id, tenant_id, prefix, name, is_admin, created_at, expires_at, revoked_at "
        "FROM api_keys "
        "WHERE %(t)s::text IS NULL OR tenant_id = %(t)s ORDER BY tenant_id, created_at, id",
        {"t": tenant_id},
    ).fetchall()


def revoke_key(conn: Connection[Any], key_id: UUID) -> dict[str, Any] | None:
    """Revoke (idempotent: the first revocation time is kept); None for an unknown key."""
    return conn.execute(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = %s "
        "RETURNING id, tenant_id, prefix, name, is_admin, created_at, expires_at, revoked_at",
        (key_id,),
    ).fetchone()


def resolve_key(conn: Connection[Any], key: str) -> KeyOwner | None:
    """The owner of a key that is not revoked (`expired` tells whether it is past its expiry,
    by the database's clock); None for unknown or revoked keys."""
    row = conn.execute(
        "SELECT id, tenant_id, is_admin, expires_at, coalesce(expires_at <= now(), false) "
        "AS expired FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
        (hash_key(key),),
    ).fetchone()
    if row is None:
        return None
    return KeyOwner(row["id"], row["tenant_id"], row["is_admin"], row["expires_at"], row["expired"])
