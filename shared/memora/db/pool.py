"""Connection pools: psycopg 3 with pgvector types registered on every connection, and the
database roles that row-level security confines (migration 0006, docs/security.md).

A pool's connections work as `memora_system` (cross-tenant work; it bypasses row security);
`Pool.tenant_connection` lends one as `memora_tenant` with the `memora.tenant` setting, which
PostgreSQL confines to that tenant's rows whatever the query. The switch is committed at
once (autocommit), so a rollback by the borrower cannot undo it. It is made by the pool's
connection check on checkout, only when the connection is not already switched that way (a
connection lent to a tenant is switched back on its next checkout for other work). A
connection that needs no switch is checked with an empty query, unless it came back less
than `ALIVE_WINDOW` seconds ago: the read path lends five connections a search, and a round
trip each to ask whether a connection used a moment ago still works was a tenth of a
search's time. Off (`row_security=False`), connections keep the login role: for a superuser
login that should not be confined (benchmarks, comparisons).

Every connection also carries the process's embedding generation (`memora.embedding_generation`,
`use_embedding_generation`): the database refuses a vector written under a generation that is
no longer live (migration 0037). A change reaches each connection on its next checkout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from memora.basics.config import Settings

TENANT_ROLE = "memora_tenant"
SYSTEM_ROLE = "memora_system"
ALIVE_WINDOW = 0.5  # seconds: a connection given back more recently is not checked again
# the embedding generation this process's vectors belong to, by database (host, port, name)
_generations: dict[tuple[str, int, str], int] = {}


def _database(conn: psycopg.Connection[Any]) -> tuple[str, int, str]:
    return conn.info.host, conn.info.port, conn.info.dbname


def use_embedding_generation(conn: psycopg.Connection[Any], generation: int) -> None:
    """The embedding generation this process's vectors of `conn`'s database belong to, set on
    the process's connections to it (each on its next checkout)."""
    _generations[_database(conn)] = generation


_pinned = threading.local()


def pin_embedding_generation(generation: int | None) -> int | None:
    """The generation of the vectors this thread is about to write, over the process's (None:
    the process's again); the one it replaces."""
    previous: int | None = getattr(_pinned, "generation", None)
    _pinned.generation = generation
    return previous


def _generation(conn: psycopg.Connection[Any]) -> int | None:
    pinned: int | None = getattr(_pinned, "generation", None)
    return pinned if pinned is not None else _generations.get(_database(conn))


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def _switch(conn: psycopg.Connection[Any], role: str | None, tenant: str = "") -> None:
    """Set the role and tenant (None: keep them) and the embedding generation for the session,
    committed whatever the borrower does later."""
    autocommit = conn.autocommit
    conn.autocommit = True
    found = _generation(conn)
    generation = "" if found is None else str(found)
    try:
        if role is None:
            conn.execute(
                "SELECT set_config('memora.embedding_generation', %s, false)", (generation,)
            )
        else:
            conn.execute(
                "SELECT set_config('role', %s, false), set_config('memora.tenant', %s, false), "
                "set_config('memora.embedding_generation', %s, false)",
                (role, tenant, generation),
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


@dataclass
class _Lending:
    tenant: str | None = None  # whose rows the session is confined to (None: cross-tenant)
    generation: int | None = None  # the embedding generation set on the session
    returned: float = float("-inf")  # time.monotonic() when last given back


class Pool(ConnectionPool):
    """A pool whose connections are cross-tenant (`memora_system`) unless lent for a tenant."""

    def __init__(self, url: str, *, row_security: bool = True, **kwargs: Any) -> None:
        self.row_security = row_security
        self._lendings: WeakKeyDictionary[psycopg.Connection[Any], _Lending] = WeakKeyDictionary()
        super().__init__(url, configure=self._setup, check=self._check, **kwargs)

    def _setup(self, conn: psycopg.Connection[Any]) -> None:
        _configure(conn)
        _switch(conn, SYSTEM_ROLE if self.row_security else None)
        self._lendings[conn] = _Lending(generation=_generation(conn))

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """On every checkout: the role it is lent with, and that it works."""
        tenant = _lending_to.get() if self.row_security else None
        lending = self._lendings.get(conn)
        if self.row_security and (lending is None or lending.tenant != tenant):
            self._lendings.pop(conn, None)  # unknown until the switch is through
            _switch(conn, SYSTEM_ROLE if tenant is None else TENANT_ROLE, tenant or "")
            self._lendings[conn] = _Lending(tenant, _generation(conn))
        elif lending is None or lending.generation != _generation(conn):
            _switch(conn, None)  # the process moved to another embedding generation
            self._lendings[conn] = _Lending(tenant, _generation(conn))
        elif time.monotonic() - lending.returned > ALIVE_WINDOW:
            ConnectionPool.check_connection(conn)

    def putconn(self, conn: psycopg.Connection[Any]) -> None:
        if (lending := self._lendings.get(conn)) is not None:
            lending.returned = time.monotonic()
        super().putconn(conn)

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
