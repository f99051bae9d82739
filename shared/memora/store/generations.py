"""embedding_generations (migration 0037): which model made the stored vectors (the live
generation) and which one `memora reembed` is building beside them.

A vector written under a generation that is no longer live fails with SQLSTATE MG001 (the
tables' `memora_embedding_check` trigger, or `check` on the read path): `changed` recognises it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import Connection

from memora.basics.config import Settings
from memora.store.units import schema_embedding_dim

GENERATION_CHANGED = "MG001"


_DIMENSIONS = re.compile(r"expected \d+ dimensions, not \d+")


class GenerationChanged(RuntimeError):
    """The live embedding generation is no longer the one a vector was made with."""


def changed(exc: BaseException) -> bool:
    """`exc` (or what caused it) is the database's MG001, or a vector of another dimension than
    its column's (pgvector refuses it before the trigger sees it): the live generation moved
    on."""
    while exc is not None:
        if isinstance(exc, GenerationChanged):
            return True
        if isinstance(exc, psycopg.Error) and exc.sqlstate == GENERATION_CHANGED:
            return True
        if isinstance(exc, psycopg.errors.DataException) and _DIMENSIONS.search(str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


@dataclass(frozen=True)
class Generation:
    id: int
    state: str
    provider: str
    model: str
    dim: int
    base_url: str | None = None

    def same_model(self, provider: str, model: str, dim: int) -> bool:
        return (self.provider, self.model, self.dim) == (provider, model, dim)

    def describe(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.model!r} ({self.provider}{where}, {self.dim}-d)"


_COLUMNS = "id, state, provider, model, dim, base_url"


def _of(row: dict[str, Any] | None) -> Generation | None:
    return None if row is None else Generation(**{k: row[k] for k in _COLUMNS.split(", ")})


def find(conn: Connection[Any], state: str) -> Generation | None:
    return _of(
        conn.execute(
            f"SELECT {_COLUMNS} FROM embedding_generations WHERE state = %s", (state,)
        ).fetchone()
    )


def live(conn: Connection[Any], settings: Settings) -> Generation:
    """The live generation; the first use records the configured model as live, with the
    schema's dimension (committed by the caller)."""
    found = find(conn, "live")
    if found is not None:
        return found
    conn.execute(
        "INSERT INTO embedding_generations (id, state, provider, model, dim, base_url) "
        "SELECT 1, 'live', %s, %s, %s, %s "
        "WHERE NOT EXISTS (SELECT 1 FROM embedding_generations) ON CONFLICT DO NOTHING",
        (
            settings.embedding_provider,
            settings.embedding_model,
            schema_embedding_dim(conn) or settings.embedding_dim,
            settings.embedding_base_url if settings.embedding_provider != "local" else None,
        ),
    )
    seeded = find(conn, "live")
    assert seeded is not None, "embedding_generations has rows but none live"
    return seeded


def start_building(
    conn: Connection[Any], provider: str, model: str, dim: int, base_url: str | None
) -> Generation:
    """Record the generation to build (the caller checked that none is being built)."""
    row = conn.execute(
        f"""
        INSERT INTO embedding_generations (id, state, provider, model, dim, base_url)
        SELECT coalesce(max(id), 0) + 1, 'building', %s, %s, %s, %s FROM embedding_generations
        RETURNING {_COLUMNS}
        """,
        (provider, model, dim, base_url),
    ).fetchone()
    built = _of(row)
    assert built is not None
    return built


def forget_building(conn: Connection[Any]) -> None:
    conn.execute("DELETE FROM embedding_generations WHERE state = 'building'")


def make_live(conn: Connection[Any], generation: int) -> None:
    """Retire the live generation and make `generation` live (within the switch)."""
    conn.execute("UPDATE embedding_generations SET state = 'retired' WHERE state = 'live'")
    conn.execute(
        "UPDATE embedding_generations SET state = 'live', switched_at = now() WHERE id = %s",
        (generation,),
    )


def set_local(conn: Connection[Any], generation: int) -> None:
    """The generation the vectors of the current transaction's writes were made with."""
    conn.execute("SELECT set_config('memora.embedding_generation', %s, true)", (str(generation),))


def check(conn: Connection[Any], generation: int) -> None:
    """GenerationChanged unless `generation` is live (in this statement's snapshot)."""
    try:
        conn.execute("SELECT memora_embedding_live(%s)", (generation,))
    except psycopg.Error as exc:
        if exc.sqlstate == GENERATION_CHANGED:
            raise GenerationChanged(str(exc)) from exc
        raise
