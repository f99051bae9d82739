"""Typed reads: psycopg builds each row as a dataclass from its columns (`class_row`)."""

from __future__ import annotations

from typing import Any, TypeVar

from psycopg import Connection
from psycopg.rows import class_row

T = TypeVar("T")


def fetch_all(conn: Connection[Any], cls: type[T], sql: str, params: Any = None) -> list[T]:
    with conn.cursor(row_factory=class_row(cls)) as cur:
        return cur.execute(sql, params).fetchall()


def fetch_one(conn: Connection[Any], cls: type[T], sql: str, params: Any = None) -> T | None:
    with conn.cursor(row_factory=class_row(cls)) as cur:
        return cur.execute(sql, params).fetchone()
