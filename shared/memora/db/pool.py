"""Connection pools: psycopg 3 with pgvector types registered on every connection."""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def connect(url: str) -> psycopg.Connection[Any]:
    """A single connection (CLI, migrations, tests)."""
    conn = psycopg.connect(url, row_factory=dict_row)
    _configure(conn)
    return conn


def make_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "memora",
    timeout: float = 5.0,
) -> ConnectionPool:
    """`timeout`: how long a caller waits for a connection. While the database is down every
    request waits this long before its 503, so it is seconds, not psycopg_pool's 30.

    A failed connection is retried with doubling delays; giving such an attempt up after 10 s
    (not 5 minutes) lets the next request start afresh, so the pool reconnects at once when
    the database is back instead of after a delay that grew with the outage."""
    pool: ConnectionPool = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"row_factory": dict_row, "autocommit": False},
        configure=_configure,
        name=name,
        timeout=timeout,
        reconnect_timeout=10.0,
        open=False,
        check=ConnectionPool.check_connection,
    )
    pool.open(wait=True, timeout=30)
    return pool
