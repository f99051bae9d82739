"""Connection pools: psycopg 3 with pgvector types registered on every connection, and the
database roles that row-level security confines (migration 0006, docs/security.md).

A pool's connections work as `memora_system` (cross-tenant work; it bypasses row security);
`Pool.tenant_connection` lends one as `memora_tenant` with the `memora.tenant` setting, which
PostgreSQL confines to that tenant's rows whatever the query. The switch is committed at
once (autocommit), so a rollback by the borrower cannot undo it. It is made by the pool's
connection check, the round trip every checkout makes anyway (a connection lent to a tenant
is switched back on its next checkout), so confinement costs no extra round trip. Off
(`row_security=False`), connections keep the login role: for a superuser login that should
not be confined (benchmarks, comparisons).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from memora.basics.config import Settings

TENANT_ROLE = "memora_tenant"
SYSTEM_ROLE = "memora_system"


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def _switch(conn: psycopg.Connection[Any], role: str, tenant: str = "") -> None:
    """Set the role and tenant for the session, committed whatever the borrower does later."""
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        conn.execute(
            "SELECT set_config('role', %s, false), set_config('memora.tenant', %s, false)",
            (role, tenant),
        )
    finally:
        conn.autocommit = autocommit


def connect(url: str, *, role: str | None = None) -> psycopg.Connection[Any]:
    """A single connection (CLI, migrations, tests); `role`: SYSTEM_ROLE for cross-tenant
    work that must also pass row-level security under a login that is not a superuser."""
    conn = psycopg.connect(url, row_factory=dict_row)
    _configure(conn)
    if role is not None:
        _switch(conn, role)
    return conn


def connect_system(settings: Settings) -> psycopg.Connection[Any]:
    """A connection for work across tenants (operator commands): as `memora_system` when
    row-level security is on."""
    return connect(
        settings.require_database_url(), role=SYSTEM_ROLE if settings.row_security else None
    )


_lending_to: ContextVar[str | None] = ContextVar("memora_lending_to", default=None)


class Pool(ConnectionPool):
    """A pool whose connections are cross-tenant (`memora_system`) unless lent for a tenant."""

    def __init__(self, url: str, *, row_security: bool = True, **kwargs: Any) -> None:
        self.row_security = row_security
        self._tenant_lent: set[int] = set()  # ids of connections last lent to a tenant
        super().__init__(url, configure=self._setup, check=self._check, **kwargs)

    def _setup(self, conn: psycopg.Connection[Any]) -> None:
        _configure(conn)
        if self.row_security:
            _switch(conn, SYSTEM_ROLE)

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """On every checkout: that the connection works, and the role it is lent with."""
        tenant = _lending_to.get() if self.row_security else None
        if tenant is not None:
            self._tenant_lent.add(id(conn))
            _switch(conn, TENANT_ROLE, tenant)
        elif id(conn) in self._tenant_lent:
            self._tenant_lent.discard(id(conn))
            _switch(conn, SYSTEM_ROLE)
        else:
            ConnectionPool.check_connection(conn)

    @contextmanager
    def tenant_connection(
        self, tenant_id: str, *, autocommit: bool = False
    ) -> Iterator[psycopg.Connection[Any]]:
        """A connection that sees and writes only `tenant_id`'s rows (row-level security).

        `autocommit`: each statement its own transaction, for reads that need no common one
        (the read path's retrievers): no BEGIN and COMMIT, two round trips of each lending."""
        token = _lending_to.set(tenant_id)
        try:
            conn = self.getconn()  # its check switches it to the tenant
        finally:
            _lending_to.reset(token)
        try:
            if autocommit:
                conn.autocommit = True
            with conn:  # as `connection()`: commit, or roll back on an error
                yield conn
        finally:
            if autocommit and not conn.closed:  # the next borrower's transactions
                conn.autocommit = False
            self.putconn(conn)


def make_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "memora",
    timeout: float = 5.0,
    row_security: bool = True,
) -> Pool:
    """`timeout`: how long a caller waits for a connection. While the database is down every
    request waits this long before its 503, so it is seconds, not psycopg_pool's 30.

    A failed connection is retried with doubling delays; giving such an attempt up after 10 s
    (not 5 minutes) lets the next request start afresh, so the pool reconnects at once when
    the database is back instead of after a delay that grew with the outage."""
    pool = Pool(
        url,
        row_security=row_security,
        min_size=min_size,
        max_size=max_size,
        kwargs={"row_factory": dict_row, "autocommit": False},
        name=name,
        timeout=timeout,
        reconnect_timeout=10.0,
        open=False,
    )
    pool.open(wait=True, timeout=30)
    return pool
