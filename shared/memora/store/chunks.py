"""conversation_chunks and conversation_index_state: the conversation search index (write
side, status and consistency). The search query itself lives in `memora.retrieval.conversation`.

Each agent's index has a live `generation`; a rebuild writes `building` beside it and switches
in one update. Writers take the state row FOR SHARE and a switch takes it FOR UPDATE, so no
chunk lands in a generation that is being retired.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import Connection

from memora.nlp.chunking import Chunk, source_hash


# ------------------------------------------------------------------------------ index state
def state(
    conn: Connection[Any], agent_key: str, model: str, dim: int, *, lock: str | None = None
) -> dict[str, Any]:
    """The agent's index state, created on first use with this model.

    lock "share" (index tasks) is FOR KEY SHARE: it keeps a rebuild's switch (lock "update",
    FOR UPDATE) out until the task commits, yet lets concurrent tasks stamp `last_sync_at` (a
    no-key update) without waiting for each other. The insert is tried only when the row is
    missing: on an existing row INSERT … ON CONFLICT waits for whoever changed it last."""
    suffix = {None: "", "share": " FOR KEY SHARE", "update": " FOR UPDATE"}[lock]
    select = "SELECT * FROM conversation_index_state WHERE agent_id = %s" + suffix
    row: dict[str, Any] | None = conn.execute(select, (agent_key,)).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO conversation_index_state (agent_id, embedding_model, embedding_dim) "
            "VALUES (%s, %s, %s) ON CONFLICT (agent_id) DO NOTHING",
            (agent_key, model, dim),
        )
        row = conn.execute(select, (agent_key,)).fetchone()
    assert row is not None
    return row


def find_state(conn: Connection[Any], agent_key: str) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT * FROM conversation_index_state WHERE agent_id = %s", (agent_key,)
    ).fetchone()


def start_build(conn: Connection[Any], agent_key: str, model: str) -> int:
    """Open the next generation for a rebuild (or resume the one being built)."""
    row = conn.execute(
        "UPDATE conversation_index_state SET building = COALESCE(building, generation + 1), "
        "building_model = %s, updated_at = now() WHERE agent_id = %s RETURNING building",
        (model, agent_key),
    ).fetchone()
    assert row is not None
    return int(row["building"])


def switch(conn: Connection[Any], agent_key: str, generation: int, model: str, dim: int) -> int:
    """Make `generation` live (the state row must be locked FOR UPDATE); older chunks go."""
    conn.execute(
        "UPDATE conversation_index_state SET generation = %s, embedding_model = %s, "
        "embedding_dim = %s, building = NULL, building_model = NULL, last_sync_at = now(), "
        "updated_at = now() WHERE agent_id = %s",
        (generation, model, dim, agent_key),
    )
    cur = conn.execute(
        "DELETE FROM conversation_chunks WHERE agent_id = %s AND generation <> %s",
        (agent_key, generation),
    )
    return max(cur.rowcount, 0)


def synced(conn: Connection[Any], agent_key: str) -> None:
    """Record the sync time, to the second: a row already stamped within the last second is
    left alone, so that concurrent index tasks of one agent rarely queue behind each other's
    update of it (a task that does re-reads the row and finds it stamped)."""
    conn.execute(
        "UPDATE conversation_index_state SET last_sync_at = now() WHERE agent_id = %s "
        "AND (last_sync_at IS NULL OR last_sync_at < now() - interval '1 second')",
        (agent_key,),
    )


# ------------------------------------------------------------------------------ chunks
def delete_covering(conn: Connection[Any], message_pks: Sequence[UUID]) -> tuple[int, set[UUID]]:
    """Delete every chunk (of any generation) that covers one of the messages; the number
    deleted and the other messages those chunks covered (they need indexing again)."""
    if not message_pks:
        return 0, set()
    rows = conn.execute(
        "DELETE FROM conversation_chunks WHERE message_pks && %s::uuid[] RETURNING message_pks",
        (list(message_pks),),
    ).fetchall()
    covered = {pk for r in rows for pk in r["message_pks"]} - set(message_pks)
    return len(rows), covered


def open_group(
    conn: Connection[Any],
    document_pk: UUID,
    before: int,
    roles: Sequence[str],
    short_chars: int,
    max_combined: int,
) -> UUID | None:
    """The last indexed message before position `before`, when its chunk combines short
    messages and has room for more: a short message appended after it belongs in that chunk,
    as if the conversation had been posted whole."""
    row = conn.execute(
        """
        SELECT m.id, c.message_pks,
               (SELECT bool_and(length(o.text) < %(short)s) FROM conversation_messages o
                WHERE o.id = ANY(c.message_pks)) AS all_short
        FROM (SELECT id FROM conversation_messages
              WHERE document_pk = %(d)s AND position < %(p)s AND searchable
                AND (role IS NULL OR role = ANY(%(roles)s))
              ORDER BY position DESC LIMIT 1) m
        JOIN conversation_chunks c ON c.message_pks @> ARRAY[m.id]
        ORDER BY c.generation DESC LIMIT 1
        """,
        {"d": document_pk, "p": before, "roles": list(roles), "short": short_chars},
    ).fetchone()
    if row is None or not row["all_short"] or len(row["message_pks"]) >= max_combined:
        return None
    return UUID(str(row["id"]))


def delete_for_document(conn: Connection[Any], document_pk: UUID) -> int:
    cur = conn.execute("DELETE FROM conversation_chunks WHERE document_pk = %s", (document_pk,))
    return max(cur.rowcount, 0)


# A message the index covers: its text matches none of the exclude patterns (`%(x)s`).
_KEPT = "NOT (%s.text ~ ANY(%%(x)s::text[]))"


# A message claimed by another operation that has not started its index_messages stage.
_WAITING = """EXISTS (SELECT 1 FROM operations o WHERE o.id = m.extracted_by AND o.id <> %(op)s
                      AND o.status IN ('queued', 'running')
                      AND NOT o.stages ? 'index_messages')"""


def pending(
    conn: Connection[Any],
    agent_key: str,
    generation: int,
    roles: Sequence[str],
    *,
    document_pk: UUID | None = None,
    message_pks: Sequence[UUID] | None = None,
    limit: int | None = None,
    exclude: Sequence[str] = (),
    operation_id: UUID | None = None,
) -> list[dict[str, Any]]:
    """Searchable messages (of the roles indexed, matching no `exclude` pattern) that no chunk
    of `generation` covers, in conversation order, each with its document's title and the
    message before it not excluded (prev_id; prev_text only when that message is searchable
    too). With `operation_id`, `waiting` says the message is claimed by another operation
    that is still to reach its own `index_messages` stage (its units may not exist yet)."""
    where = [
        "m.agent_id = %(a)s", "m.searchable", "(m.role IS NULL OR m.role = ANY(%(roles)s))",
        _KEPT % "m",
    ]  # fmt: skip
    if document_pk is not None:
        where.append("m.document_pk = %(d)s")
    if message_pks is not None:
        where.append("m.id = ANY(%(m)s::uuid[])")
    return conn.execute(
        f"""
        SELECT m.id, m.document_pk, m.position, m.role, m.speaker, m.occurred_at, m.text,
               m.content_hash, m.channel, d.title, p.id AS prev_id,
               CASE WHEN p.searchable THEN p.text END AS prev_text,
               {_WAITING if operation_id is not None else "false"} AS waiting
        FROM conversation_messages m JOIN documents d ON d.id = m.document_pk
        LEFT JOIN LATERAL (
            SELECT id, text, searchable FROM conversation_messages q
            WHERE q.document_pk = m.document_pk AND q.position < m.position AND {_KEPT % "q"}
            ORDER BY q.position DESC LIMIT 1
        ) p ON true
        WHERE {" AND ".join(where)}
          AND NOT EXISTS (SELECT 1 FROM conversation_chunks c
                          WHERE c.message_pks @> ARRAY[m.id] AND c.generation = %(g)s)
        ORDER BY m.document_pk, m.position
        {"LIMIT %(limit)s" if limit else ""}
        """,
        {
            "a": agent_key,
            "roles": list(roles),
            "d": document_pk,
            "m": list(message_pks or []),
            "g": generation,
            "limit": limit,
            "x": list(exclude),
            "op": operation_id,
        },
    ).fetchall()


def insert(
    conn: Connection[Any],
    agent_key: str,
    generation: int,
    rows: Sequence[tuple[UUID, Chunk, np.ndarray]],
) -> int:
    """(document pk, chunk, vector) triples, by COPY."""
    if not rows:
        return 0
    columns = (
        "agent_id, document_pk, message_pk, message_pks, chunk_index, generation, roles, "
        "occurred_at, text, snippet, source_hash, embedding, channels"
    )
    with conn.cursor() as cur, cur.copy(f"COPY conversation_chunks ({columns}) FROM STDIN") as cp:
        for document_pk, c, vector in rows:
            cp.write_row(
                (agent_key, document_pk, c.owner, list(c.covers), c.index, generation,
                 list(c.roles), c.occurred_at, c.text, c.snippet, c.source_hash,
                 "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]", list(c.channels))
            )  # fmt: skip
    return len(rows)


def unit_vectors(
    conn: Connection[Any], message_pks: Sequence[UUID]
) -> dict[UUID, list[np.ndarray | None]]:
    """The embeddings of the units extracted from each message (unit_sources), None where a
    unit has none yet; messages without units are absent."""
    out: dict[UUID, list[np.ndarray | None]] = {}
    if not message_pks:
        return out
    for r in conn.execute(
        "SELECT s.message_pk, u.embedding FROM unit_sources s "
        "JOIN memory_units u ON u.id = s.unit_id WHERE s.message_pk = ANY(%s::uuid[])",
        (list(message_pks),),
    ):
        vector = r["embedding"]
        out.setdefault(r["message_pk"], []).append(
            None if vector is None else np.asarray(vector.to_numpy(), dtype=np.float32)
        )
    return out


def keep_current(conn: Connection[Any], generation: int, planned: Sequence[Chunk]) -> set[Chunk]:
    """The planned chunks still current: every message they cover exists with the text they
    were built from (read FOR SHARE: an edit waits for this transaction) and no chunk of
    `generation` covers it yet."""
    pks = list({pk for c in planned for pk in c.covers})
    if not pks:
        return set()
    hashes = {
        r["id"]: r["content_hash"]
        for r in conn.execute(
            "SELECT id, content_hash FROM conversation_messages WHERE id = ANY(%s) FOR SHARE",
            (pks,),
        )
    }
    covered = {
        r["pk"]
        for r in conn.execute(
            "SELECT DISTINCT unnest(message_pks) AS pk FROM conversation_chunks "
            "WHERE message_pks && %s::uuid[] AND generation = %s",
            (pks, generation),
        )
    }
    return {
        c
        for c in planned
        if all(pk in hashes and pk not in covered for pk in c.covers)
        and source_hash([hashes[pk] for pk in c.covers]) == c.source_hash
    }


def counts(conn: Connection[Any], agent_key: str, generation: int) -> dict[str, int]:
    row = conn.execute(
        """
        SELECT
          (SELECT count(*) FROM conversation_messages WHERE agent_id = %(a)s) AS messages,
          (SELECT count(DISTINCT document_pk) FROM conversation_messages
            WHERE agent_id = %(a)s) AS conversations,
          (SELECT count(*) FROM conversation_chunks
            WHERE agent_id = %(a)s AND generation = %(g)s) AS chunks,
          (SELECT count(*) FROM conversation_chunks
            WHERE agent_id = %(a)s AND generation <> %(g)s) AS chunks_building
        """,
        {"a": agent_key, "g": generation},
    ).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}


# ------------------------------------------------------------------------------ consistency
def _agent(agent_key: str | None, column: str = "agent_id") -> str:
    return f" AND {column} = %(a)s" if agent_key is not None else ""


def orphaned(conn: Connection[Any], agent_key: str | None, limit: int) -> list[dict[str, Any]]:
    """Chunks that cover a message that is gone, or of a generation neither live nor being
    built (id, document_pk)."""
    return conn.execute(
        f"""
        SELECT c.id, c.document_pk FROM conversation_chunks c
        LEFT JOIN conversation_index_state s ON s.agent_id = c.agent_id
        WHERE (s.agent_id IS NULL OR c.generation NOT IN (s.generation, coalesce(s.building, -1))
               OR EXISTS (SELECT 1 FROM unnest(c.message_pks) AS p(pk)
                          WHERE NOT EXISTS (SELECT 1 FROM conversation_messages m
                                            WHERE m.id = p.pk))){_agent(agent_key, "c.agent_id")}
        LIMIT %(n)s
        """,
        {"a": agent_key, "n": limit},
    ).fetchall()


def stale(conn: Connection[Any], agent_key: str | None, limit: int) -> list[dict[str, Any]]:
    """Chunks whose messages changed since they were built (id, document_pk): the hash of
    the covered messages' hashes (memora.nlp.chunking.source_hash) differs."""
    return conn.execute(
        f"""
        SELECT c.id, c.document_pk FROM conversation_chunks c
        CROSS JOIN LATERAL (
            SELECT string_agg(m.content_hash, ',' ORDER BY p.ord) AS hashes, count(m.id) AS found
            FROM unnest(c.message_pks) WITH ORDINALITY AS p(pk, ord)
            LEFT JOIN conversation_messages m ON m.id = p.pk
        ) h
        WHERE h.found = cardinality(c.message_pks)
          AND encode(sha256(convert_to(h.hashes, 'UTF8')), 'hex') <> c.source_hash
          {_agent(agent_key, "c.agent_id")}
        LIMIT %(n)s
        """,
        {"a": agent_key, "n": limit},
    ).fetchall()


def unindexed(
    conn: Connection[Any],
    agent_key: str | None,
    roles: Sequence[str],
    limit: int,
    exclude: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Searchable messages (of the roles indexed, matching no `exclude` pattern) that no chunk
    of their agent's live generation covers, in documents no operation is working on (id,
    document_pk)."""
    return conn.execute(
        f"""
        SELECT m.id, m.document_pk FROM conversation_messages m
        LEFT JOIN conversation_index_state s ON s.agent_id = m.agent_id
        WHERE m.searchable AND (m.role IS NULL OR m.role = ANY(%(roles)s)) AND {_KEPT % "m"}
          AND NOT EXISTS (SELECT 1 FROM conversation_chunks c WHERE c.message_pks @> ARRAY[m.id]
                          AND c.generation = coalesce(s.generation, 1))
          AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.document_pk = m.document_pk
                          AND o.status IN ('queued', 'running')){_agent(agent_key, "m.agent_id")}
        LIMIT %(n)s
        """,
        {"a": agent_key, "roles": list(roles), "n": limit, "x": list(exclude)},
    ).fetchall()


def delete_ids(conn: Connection[Any], ids: Sequence[UUID]) -> int:
    if not ids:
        return 0
    cur = conn.execute("DELETE FROM conversation_chunks WHERE id = ANY(%s)", (list(ids),))
    return max(cur.rowcount, 0)
