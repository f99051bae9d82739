"""Re-embedding by generation (issue 57, item 6): `memora reembed --model NAME` moves every
stored vector to another embedding model (or provider, or dimension) without re-running
extraction, while the service goes on (docs/operations.md, "Changing the embedding model").

1. A `building` generation is recorded and the next columns added (`memora.store.reembed`).
2. Memory units (their text) and conversation chunks (theirs) are embedded with the new model
   in committed batches, by id (keyset): an interruption loses one batch, and a run again
   embeds only what has no next vector yet.
3. The next columns' indexes are built CONCURRENTLY (searches and writes go on).
4. What was written meanwhile is embedded (a unit edited since clears its next vectors).
5. The switch, one transaction: writers wait (SHARE lock) while the last rows written are
   embedded, then, under ACCESS EXCLUSIVE for the renames only, the columns swap and the new
   generation goes live. 6. The retired columns are dropped.

What holds during the switch: no process compares a query embedded by one model with vectors
of the other, nor stores a vector of the retired model (memora.pipeline.generation).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import Connection

from memora.basics.config import Settings
from memora.basics.errors import Conflict, Invalid
from memora.db.pool import connect
from memora.nlp.embedding import TextEmbedder, embedder_for, get_embedder
from memora.nlp.remote_embedding import remote_embedder
from memora.pipeline.generation import live_settings
from memora.store import generations, reembed
from memora.store.generations import Generation

Progress = Callable[[str, int, int], None]  # phase, done, total
LOCK_TIMEOUT = "5s"  # how long the switch waits for a lock before it tries again
SWITCH_TRIES = 20


@dataclass(frozen=True)
class Target:
    """The model to move to: `dim` None takes the model's own."""

    model: str
    provider: str = "local"
    base_url: str | None = None
    dim: int | None = None


def status(settings: Settings) -> dict[str, Any]:
    """`status_on` a connection of its own."""
    with _connect(settings) as conn:
        out = status_on(conn, settings)
        conn.commit()
    return out


def status_on(conn: Connection[Any], settings: Settings) -> dict[str, Any]:
    """The live generation, the one being built with its progress (units and chunks with their
    new vector, of how many), and whether a switch left retired columns to drop."""
    live = generations.live(conn, settings)
    building = generations.find(conn, "building")
    out: dict[str, Any] = {
        "live": _describe(live),
        "building": _describe(building) if building else None,
        "retired_columns_left": reembed.retired_left(conn),
        "progress": None,
    }
    if building is not None and reembed.next_dim(conn) is not None:
        out["progress"] = reembed.progress(conn)
    return out


def _connect(settings: Settings, *, alone: bool = False) -> Connection[Any]:
    """As the login that owns the schema (`memora migrate`'s): the build alters tables. A lock
    not had within LOCK_TIMEOUT fails (LockNotAvailable) rather than queue every search
    behind it. `alone`: Conflict while another reembed (or abandon) runs."""
    conn = connect(settings.require_database_url())
    conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
    if alone and not reembed.try_lock(conn):
        conn.close()
        raise Conflict("reembed_running", "another `memora reembed` is running on this database")
    conn.commit()
    return conn


def _describe(g: Generation) -> dict[str, Any]:
    return {"id": g.id, "provider": g.provider, "model": g.model, "dim": g.dim,
            "base_url": g.base_url}  # fmt: skip


def target_embedder(settings: Settings, target: Target) -> TextEmbedder:
    """The target model's embedder (a remote one validated as at a service's start)."""
    s = settings
    if target.provider == "local":
        local = get_embedder(
            target.model, s.torch_threads, s.embedding_batch_size, s.embedding_backend,
            s.model_cache_dir,
        )  # fmt: skip
        if target.dim is not None and local.dim != target.dim:
            raise Invalid(
                "dimension", f"{target.model!r} gives {local.dim}-d vectors, not {target.dim}"
            )
        return local
    dim = target.dim
    if dim is None:  # the server's vectors say
        key = s.embedding_api_key.get_secret_value() if s.embedding_api_key else None
        probe = remote_embedder(target.provider, target.model, target.base_url or "", api_key=key)
        dim = int(probe.embed(["memora"]).shape[1])
    live = Generation(0, "building", target.provider, target.model, dim, target.base_url)
    return embedder_for(live_settings(s, live))


def abandon(settings: Settings) -> bool:
    """Drop the generation being built and its columns; False when none was."""
    with _connect(settings, alone=True) as conn:
        found = generations.find(conn, "building") is not None
        reembed.drop_columns(conn, "_next")
        generations.forget_building(conn)
        conn.commit()
    return found


def run(
    settings: Settings, target: Target, *, batch_size: int = 256, progress: Progress | None = None
) -> dict[str, Any]:
    """Build the target's generation (or resume its build), switch to it, drop the old one."""
    report = progress or (lambda phase, done, total: None)
    with _connect(settings, alone=True) as conn:
        live = generations.live(conn, settings)
        conn.commit()
        if reembed.retired_left(conn):
            _settle(settings)  # a switch that ended before its clean-up
        building = generations.find(conn, "building")
        same = live.same_model(target.provider, target.model, target.dim or live.dim)
        if building is None and same:
            return {"switched": False, "live": _describe(live)}
        embedder = target_embedder(settings, target)
        building = _open(conn, target, embedder.dim, building)
        job = _Build(conn, embedder, building.dim, batch_size, report)
        job.fill()
        _build_indexes(settings, report)
        job.fill()  # written while the indexes were built
        _switch(job, live, building)
    _settle(settings)
    return {"switched": True, "live": _describe(building), "retired": _describe(live),
            "embedded": job.embedded}  # fmt: skip


def _open(
    conn: Connection[Any], target: Target, dim: int, building: Generation | None
) -> Generation:
    """The generation to build: the one being built (the same model: resumed), else a new one."""
    if building is not None:
        if not building.same_model(target.provider, target.model, dim):
            raise Conflict(
                "reembed_in_progress",
                f"a reembed to {building.describe()} is under way: run it again to resume it, "
                "or `memora reembed --abandon` to drop it first",
            )
        if reembed.next_dim(conn) != dim:  # columns lost (restored backup): added again
            reembed.drop_columns(conn, "_next")
            reembed.add_columns(conn, dim)
            conn.commit()
        return building
    building = generations.start_building(
        conn, target.provider, target.model, dim,
        target.base_url if target.provider != "local" else None,
    )  # fmt: skip
    reembed.add_columns(conn, dim)
    conn.commit()
    return building


class _Build:
    """Embeds, in batches, what has no next vector yet."""

    def __init__(
        self, conn: Connection[Any], embedder: TextEmbedder, dim: int, batch: int,
        report: Progress,
    ) -> None:  # fmt: skip
        self.conn, self.embedder, self.dim, self.batch = conn, embedder, dim, batch
        self.report = report
        self.embedded = 0

    def _vectors(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts)
        self.embedded += len(texts)
        return vectors

    def fill(self, *, commit: bool = True) -> None:
        """Every unit and chunk without a next vector: each batch committed, with its progress
        reported; `commit` False (the switch's last rows, under its lock): neither, nor the
        counting of the tables for the progress."""
        counted = ("units", "units_done", "chunks", "chunks_done")
        counts = reembed.progress(self.conn) if commit else dict.fromkeys(counted, 0)
        report = self.report if commit else (lambda phase, done, total: None)
        done, total = counts["units_done"], counts["units"]
        after = None
        while rows := reembed.units_to_embed(self.conn, after, self.batch):
            vectors = self._vectors([r["text"] for r in rows])
            rows_in = [(r["id"], r["text"], v) for r, v in zip(rows, vectors, strict=True)]
            done += reembed.write_units(self.conn, self.dim, rows_in)
            after = rows[-1]["id"]
            self._commit(commit)
            report("memories", min(done, total), total)
        done, total, after = counts["chunks_done"], counts["chunks"], None
        while rows := reembed.chunks_to_embed(self.conn, after, self.batch):
            vectors = self._vectors([r["text"] for r in rows])
            done += reembed.write_chunks(
                self.conn, self.dim, [(r["id"], v) for r, v in zip(rows, vectors, strict=True)]
            )
            after = rows[-1]["id"]
            self._commit(commit)
            report("conversation chunks", min(done, total), total)
        reembed.sync_copies(self.conn, self.dim)
        self._commit(commit)

    def _commit(self, commit: bool) -> None:
        if commit:
            self.conn.commit()


def _build_indexes(settings: Settings, report: Progress) -> None:
    with _connect(settings) as conn:
        conn.autocommit = True
        conn.execute("SET lock_timeout = 0")  # CONCURRENTLY waits for older transactions
        indexes = reembed.vector_indexes(conn)
        for i, (name, table, definition) in enumerate(indexes):
            reembed.build_index(conn, name, table, definition)
            report("indexes", i + 1, len(indexes))


def _switch(job: _Build, live: Generation, building: Generation) -> None:
    """The last rows embedded with writers waiting, then the swap; tried again when a lock
    is not had within LOCK_TIMEOUT (a long transaction holds one)."""
    conn = job.conn
    indexes = [name for name, _, _ in reembed.vector_indexes(conn)]
    conn.commit()
    for attempt in range(1, SWITCH_TRIES + 1):
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                reembed.lock(conn, "SHARE")
                job.fill(commit=False)
                reembed.lock(conn, "ACCESS EXCLUSIVE")
                reembed.swap(conn, live.dim, building.dim, indexes, building.model)
                generations.make_live(conn, building.id)
            job.report("switch", 1, 1)
            return
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
            if attempt == SWITCH_TRIES:
                raise
            time.sleep(min(attempt, 5))


def _settle(settings: Settings) -> None:
    """The retired columns dropped (tried again while a lock is not had)."""
    for attempt in range(1, SWITCH_TRIES + 1):
        try:
            with _connect(settings) as conn:
                conn.autocommit = True
                reembed.settle(conn)
            return
        except psycopg.errors.LockNotAvailable:
            if attempt == SWITCH_TRIES:
                raise
            time.sleep(min(attempt, 5))
