"""The SQL of re-embedding by generation (`memora.usecases.reembed`): the next generation's
vectors are built in `*_next` columns beside the live ones, then one short transaction swaps
the columns' names, and the retired columns are dropped.

Every stored copy of a vector has its next column: `memory_units.embedding` (the source),
`memory_vectors.embedding` (halfvec, the read path's copy), `unit_entities.signature` (its
binary quantisation) and `conversation_chunks.embedding`. The triggers that keep the copies in
step fire on `embedding` only, so filling the next columns fires none of them; while a build is
open, a BEFORE UPDATE OF embedding trigger on `memory_units` (an edit, a merge re-embeds)
clears the unit's next vectors, which the catch-up then makes again from the new text.

PostgreSQL binds a trigger's `UPDATE OF` columns and `WHEN` condition, an index's columns and a
NOT NULL to the column itself, not its name: the swap recreates the triggers that name
`embedding` from their definitions, the indexes were built on the next columns beforehand
(CONCURRENTLY, under the live ones' names + `_next`), and NOT NULL becomes a CHECK (NOT VALID,
validated after the switch, then turned back into NOT NULL without a scan). Trigger functions
that cast to the dimension (`::halfvec(384)`) are rewritten for the new one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

# table, vector column, the type of its copy (halfvec: the read path's, bit: signatures)
COLUMNS = (
    ("memory_units", "embedding", "vector"),
    ("memory_vectors", "embedding", "halfvec"),
    ("unit_entities", "signature", "bit"),
    ("conversation_chunks", "embedding", "vector"),
)
TABLES = ", ".join(dict.fromkeys(t for t, _, _ in COLUMNS))
NOT_NULL = ("memory_vectors", "conversation_chunks")
RESET = "memory_units_embedding_next_reset"


def try_lock(conn: Connection[Any]) -> bool:
    """One reembed at a time: a session lock, held until `conn` closes."""
    row = conn.execute("SELECT pg_try_advisory_lock(hashtext('memora reembed')) AS ok").fetchone()
    return bool(row and row["ok"])


def next_dim(conn: Connection[Any]) -> int | None:
    """The dimension of the next columns being built; None when there are none."""
    row = conn.execute(
        "SELECT atttypmod AS dim FROM pg_attribute WHERE attrelid = 'memory_units'::regclass "
        "AND attname = 'embedding_next' AND NOT attisdropped"
    ).fetchone()
    return int(row["dim"]) if row else None


def retired_left(conn: Connection[Any]) -> bool:
    """Columns of a retired generation still there (a switch whose clean-up did not finish)."""
    row = conn.execute(
        "SELECT count(*) AS n FROM pg_attribute WHERE attname LIKE '%%\\_retired' "
        "AND NOT attisdropped AND attrelid = ANY(%s::regclass[])",
        ([t for t, _, _ in COLUMNS],),
    ).fetchone()
    return bool(row and row["n"])


def add_columns(conn: Connection[Any], dim: int) -> None:
    """The next columns (NULL: nothing rewritten) and the trigger that clears a unit's next
    vectors when its live one changes."""
    for table, column, kind in COLUMNS:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}_next {kind}({dim})")
    conn.execute("ALTER TABLE memory_vectors ALTER COLUMN embedding_next SET STORAGE PLAIN")
    conn.execute(
        f"""
        CREATE OR REPLACE FUNCTION {RESET}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.embedding_next := NULL;
            UPDATE memory_vectors SET embedding_next = NULL
            WHERE unit_id = NEW.id AND embedding_next IS NOT NULL;
            UPDATE unit_entities SET signature_next = NULL
            WHERE unit_id = NEW.id AND signature_next IS NOT NULL;
            RETURN NEW;
        END $$
        """
    )
    conn.execute(f"DROP TRIGGER IF EXISTS {RESET} ON memory_units")
    conn.execute(
        f"CREATE TRIGGER {RESET} BEFORE UPDATE OF embedding ON memory_units FOR EACH ROW "
        f"WHEN (NEW.embedding IS DISTINCT FROM OLD.embedding) EXECUTE FUNCTION {RESET}()"
    )
    conn.execute(f"ALTER TABLE memory_units ENABLE ALWAYS TRIGGER {RESET}")


def drop_columns(conn: Connection[Any], suffix: str) -> None:
    """Drop the `_next` columns (an abandoned build) or the `_retired` ones (after a switch),
    with their indexes, and the build's trigger."""
    conn.execute(f"DROP TRIGGER IF EXISTS {RESET} ON memory_units")
    conn.execute(f"DROP FUNCTION IF EXISTS {RESET}()")
    for table, column, _ in COLUMNS:
        conn.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}{suffix}")


def _text(vector: np.ndarray) -> str:
    return "[" + ",".join(map(str, np.asarray(vector, dtype=np.float32).tolist())) + "]"


# ------------------------------------------------------------------------------ filling
def units_to_embed(conn: Connection[Any], after: UUID | None, limit: int) -> list[dict[str, Any]]:
    """Embedded units without a next vector, by id after `after` (keyset pagination)."""
    return conn.execute(
        "SELECT id, text FROM memory_units WHERE embedding IS NOT NULL "
        "AND embedding_next IS NULL AND (%(after)s::uuid IS NULL OR id > %(after)s) "
        "ORDER BY id LIMIT %(n)s",
        {"after": after, "n": limit},
    ).fetchall()


def write_units(
    conn: Connection[Any], dim: int, rows: Sequence[tuple[UUID, str, np.ndarray]]
) -> int:
    """Set the units' next vectors, and their copies', where the text is still the one that was
    embedded (an edit since is left for the catch-up); how many were set."""
    if not rows:
        return 0
    row = conn.execute(
        f"""
        WITH d AS (SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS d(id, text, v)),
        done AS (
            UPDATE memory_units u SET embedding_next = d.v::vector({dim}) FROM d
            WHERE u.id = d.id AND u.text = d.text AND u.embedding IS NOT NULL
            RETURNING u.id, u.embedding_next
        ),
        copies AS (
            UPDATE memory_vectors m SET embedding_next = done.embedding_next::halfvec({dim})
            FROM done WHERE m.unit_id = done.id
        ),
        signatures AS (
            UPDATE unit_entities ue
            SET signature_next = binary_quantize(done.embedding_next)::bit({dim})
            FROM done WHERE ue.unit_id = done.id
        )
        SELECT count(*) AS n FROM done
        """,
        ([r[0] for r in rows], [r[1] for r in rows], [_text(r[2]) for r in rows]),
    ).fetchone()
    return int(row["n"]) if row else 0


def chunks_to_embed(conn: Connection[Any], after: UUID | None, limit: int) -> list[dict[str, Any]]:
    """Conversation chunks (of every index generation) without a next vector, by id."""
    return conn.execute(
        "SELECT id, text FROM conversation_chunks WHERE embedding_next IS NULL "
        "AND (%(after)s::uuid IS NULL OR id > %(after)s) ORDER BY id LIMIT %(n)s",
        {"after": after, "n": limit},
    ).fetchall()


def write_chunks(conn: Connection[Any], dim: int, rows: Sequence[tuple[UUID, np.ndarray]]) -> int:
    if not rows:
        return 0
    cur = conn.execute(
        f"UPDATE conversation_chunks c SET embedding_next = d.v::vector({dim}) "
        "FROM unnest(%s::uuid[], %s::text[]) AS d(id, v) WHERE c.id = d.id",
        ([r[0] for r in rows], [_text(r[1]) for r in rows]),
    )
    return max(cur.rowcount, 0)


def sync_copies(conn: Connection[Any], dim: int) -> int:
    """Copies written since their unit got its next vector (a unit made active again, a new
    mention): given it now. How many."""
    vectors = conn.execute(
        f"UPDATE memory_vectors m SET embedding_next = u.embedding_next::halfvec({dim}) "
        "FROM memory_units u WHERE m.unit_id = u.id AND m.embedding_next IS NULL "
        "AND u.embedding_next IS NOT NULL"
    )
    signatures = conn.execute(
        "UPDATE unit_entities ue "
        f"SET signature_next = binary_quantize(u.embedding_next)::bit({dim}) "
        "FROM memory_units u WHERE ue.unit_id = u.id AND ue.signature_next IS NULL "
        "AND u.embedding_next IS NOT NULL"
    )
    return max(vectors.rowcount, 0) + max(signatures.rowcount, 0)


def progress(conn: Connection[Any]) -> dict[str, int]:
    """Units and chunks to embed, and those with their next vector."""
    row = conn.execute(
        """
        SELECT (SELECT count(*) FROM memory_units WHERE embedding IS NOT NULL) AS units,
               (SELECT count(*) FROM memory_units WHERE embedding IS NOT NULL
                  AND embedding_next IS NOT NULL) AS units_done,
               (SELECT count(*) FROM conversation_chunks) AS chunks,
               (SELECT count(*) FROM conversation_chunks
                  WHERE embedding_next IS NOT NULL) AS chunks_done
        """
    ).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}


# ------------------------------------------------------------------------------ indexes
def vector_indexes(conn: Connection[Any]) -> list[tuple[str, str, str]]:
    """(name, table, definition) of the indexes over a live vector column."""
    out = []
    for table, column, _ in COLUMNS:
        for r in conn.execute(
            "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %s::regclass AND c.relname !~ '_(next|retired)$'",
            (table,),
        ):
            on = r["definition"].split(" USING ", 1)[1]
            if re.search(rf"\b{column}\b", on):
                out.append((r["name"], table, r["definition"]))
    return out


def build_index(conn: Connection[Any], name: str, table: str, definition: str) -> bool:
    """Build `name`'s copy over the next column, CONCURRENTLY (`conn` in autocommit); one
    left invalid by an interrupted build is made again. False when it was there already."""
    column = next(c for t, c, _ in COLUMNS if t == table)
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = %s",
        (f"{name}_next",),
    ).fetchone()
    if row is not None and row["indisvalid"]:
        return False
    if row is not None:
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}_next")
    conn.execute(next_index(name, column, definition))
    return True


def next_index(name: str, column: str, definition: str) -> str:
    """`definition` (pg_get_indexdef) made over `column`'s next column, named `name`_next,
    built CONCURRENTLY."""
    head, using = definition.split(" USING ", 1)
    head = head.replace(f"INDEX {name} ON", f"INDEX CONCURRENTLY {name}_next ON", 1)
    using = re.sub(rf"\b{column}\b", f"{column}_next", using)
    return f"{head} USING {using}"


# ------------------------------------------------------------------------------ the switch
def lock(conn: Connection[Any], mode: str) -> None:
    """SHARE: writers wait, searches go on (the catch-up); ACCESS EXCLUSIVE: the swap."""
    conn.execute(f"LOCK TABLE embedding_generations, {TABLES} IN {mode} MODE")


def _triggers(conn: Connection[Any]) -> list[dict[str, Any]]:
    """The triggers that name the `embedding` column (bound to the column, not its name)."""
    return conn.execute(
        "SELECT tgname, tgrelid::regclass::text AS tbl, tgenabled, "
        "pg_get_triggerdef(oid) AS definition FROM pg_trigger "
        "WHERE NOT tgisinternal AND tgrelid = ANY(%s::regclass[]) "
        "AND pg_get_triggerdef(oid) ~ '\\membedding\\M'",
        (["memory_units", "conversation_chunks"],),
    ).fetchall()


def _functions(conn: Connection[Any], old_dim: int, dim: int) -> list[str]:
    """The schema's functions that cast to the old dimension, rewritten for the new one."""
    cast = rf"\b(vector|halfvec|bit)\({old_dim}\)"
    rows = conn.execute(
        "SELECT pg_get_functiondef(p.oid) AS definition FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema() AND p.prosrc ~ %s",
        (rf"(vector|halfvec|bit)\({old_dim}\)",),
    ).fetchall()
    return [re.sub(cast, rf"\g<1>({dim})", r["definition"]) for r in rows]


def swap(conn: Connection[Any], old_dim: int, dim: int, indexes: Sequence[str], model: str) -> None:
    """Make the next columns the live ones (the tables locked ACCESS EXCLUSIVE)."""
    conn.execute(f"DROP TRIGGER IF EXISTS {RESET} ON memory_units")
    triggers = _triggers(conn)
    functions = _functions(conn, old_dim, dim) if dim != old_dim else []
    for t in triggers:
        conn.execute(f"DROP TRIGGER {t['tgname']} ON {t['tbl']}")
    for table, column, _ in COLUMNS:
        conn.execute(f"ALTER TABLE {table} RENAME COLUMN {column} TO {column}_retired")
        conn.execute(f"ALTER TABLE {table} RENAME COLUMN {column}_next TO {column}")
    for name in indexes:
        conn.execute(f"ALTER INDEX {name} RENAME TO {name}_retired")
        conn.execute(f"ALTER INDEX {name}_next RENAME TO {name}")
    for table in NOT_NULL:
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding_retired DROP NOT NULL")
        conn.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_embedding_present "
            "CHECK (embedding IS NOT NULL) NOT VALID"
        )
    for definition in functions:
        conn.execute(definition)
    for t in triggers:
        conn.execute(t["definition"])
        if t["tgenabled"] == "A":
            conn.execute(f"ALTER TABLE {t['tbl']} ENABLE ALWAYS TRIGGER {t['tgname']}")
    conn.execute(
        "UPDATE conversation_index_state SET embedding_model = %s, embedding_dim = %s, "
        "updated_at = now()",
        (model, dim),
    )


def settle(conn: Connection[Any]) -> None:
    """After the switch (`conn` in autocommit): the NOT NULL checks validated (no lock that
    stops reads or writes) and made NOT NULL again, the retired columns dropped, the tables
    analysed."""
    for table in NOT_NULL:
        constraint = f"{table}_embedding_present"
        found = conn.execute(
            "SELECT 1 FROM pg_constraint WHERE conname = %s", (constraint,)
        ).fetchone()
        if found is None:
            continue
        conn.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {constraint}")
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET NOT NULL")
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")
    drop_columns(conn, "_retired")
    conn.execute(f"ANALYZE {TABLES}")  # the planner's statistics of the new columns
