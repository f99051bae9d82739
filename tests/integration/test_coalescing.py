"""Coalesced appends (issue 60): an append joins its conversation's pending append operation
while that one's extract has not started, on real PostgreSQL + pgvector. The operations are
collected instead of run, so that the tests decide when each one starts."""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

import pytest

from memora.basics.config import Settings
from memora.basics.models import MemoryItem
from memora.basics.stages import INGEST_STAGES, Stage
from memora.basics.tenancy import Scope
from memora.pipeline.context import AppContext
from memora.pipeline.runner import Pipeline
from memora.store import append_operations, operations
from memora.store import messages as message_store
from memora.usecases import ingest
from tests.integration.test_appends import completed, messages, snapshot

pytestmark = pytest.mark.integration


class Collect:
    """A task backend that records what it is given and runs nothing."""

    def __init__(self) -> None:
        self.sent: list[tuple[UUID, bool, float]] = []
        self.held: list[bool] = []

    def enqueue(
        self,
        stage: Stage,
        operation_id: UUID,
        *,
        backfill: bool = False,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        assert stage is INGEST_STAGES[0]
        self.sent.append((operation_id, backfill, delay))
        self.held.append(held)


def _app(inline_api: Any, pool: Any, **changes: Any) -> tuple[AppContext, Collect]:
    settings: Settings = inline_api.app.state.settings
    backend = Collect()
    return AppContext(settings.model_copy(update=changes), pool, backend), backend


def _append(
    app: AppContext, pool: Any, agent_id: str, batch: list[dict[str, Any]], **kw: Any
) -> ingest.AppendAccepted:
    with pool.connection() as conn:
        return ingest.append(
            app, conn, Scope(), agent_id, "chat", [MemoryItem(**m) for m in batch], **kw
        )


def _run(inline_api: Any, operation_id: UUID) -> None:
    inline_api.app.state.backend.enqueue(INGEST_STAGES[0], operation_id)


def _items(pool: Any, operation_id: UUID) -> int:
    with pool.connection() as conn:
        op = operations.get_operation(conn, operation_id)
    assert op is not None
    return op.counts["items"]


def test_appends_join_the_pending_operation_and_end_as_posted_whole(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    whole, live = f"{agent_id}-whole", f"{agent_id}-live"
    body = {"agent_id": whole, "document_id": "chat", "items": messages(), "title": "Trip"}
    completed(inline_api, inline_api.post("/api/memories/batch", json=body).json())

    app, backend = _app(inline_api, pool)
    chat, done = messages(), []
    i = 0
    while i < len(chat):
        done.append(_append(app, pool, live, chat[i : i + 1 + i % 2], title="Trip"))
        i += 1 + i % 2
    carrier = done[0].operation_id
    assert {d.operation_id for d in done} == {carrier}
    assert [d.outcome for d in done] == ["created"] + ["appended"] * (len(done) - 1)
    assert sum(d.new for d in done) == len(chat) == _items(pool, carrier)
    # one hand-off; a new conversation's first operation is not held (no burst to wait for),
    # and the others joined it before its extract started
    assert backend.sent == [(carrier, False, 0.0)]

    retry = _append(app, pool, live, chat[2:4], title="Trip")
    assert (retry.outcome, retry.operation_id, retry.new) == ("unchanged", carrier, 0)
    _run(inline_api, carrier)
    assert completed(inline_api, {"operation_id": carrier})["counts"]["items"] == len(chat)
    a, b = snapshot(pool, whole), snapshot(pool, live)
    for part in ("order", "units", "entities", "chunks", "links"):
        assert a[part] == b[part], part


def test_a_full_started_or_other_priority_operation_is_not_joined(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    app, backend = _app(inline_api, pool, append_coalesce_messages=4)
    chat = messages()
    first = _append(app, pool, agent_id, chat[0:3])
    assert _append(app, pool, agent_id, chat[3:4]).operation_id == first.operation_id
    full = _append(app, pool, agent_id, chat[4:5])  # 4 + 1 > 4: a new operation
    assert full.operation_id != first.operation_id
    with pool.connection() as conn:  # its extract starts: nothing joins it any more
        operations.stage_started(conn, full.operation_id, Stage.EXTRACT)
        conn.commit()
    started = _append(app, pool, agent_id, chat[5:6])
    assert started.operation_id not in (first.operation_id, full.operation_id)
    backfill = _append(app, pool, agent_id, chat[6:7], backfill=True)
    assert backfill.operation_id != started.operation_id
    assert _append(app, pool, agent_id, chat[7:8], backfill=True).operation_id == (
        backfill.operation_id
    )
    big = _append(app, pool, agent_id, chat[8:12], backfill=True)  # alone beyond the bound
    assert big.operation_id != backfill.operation_id and _items(pool, big.operation_id) == 4
    assert [op for op, _, _ in backend.sent] == [
        first.operation_id, full.operation_id, started.operation_id, backfill.operation_id,
        big.operation_id,
    ]  # fmt: skip
    # the first one was not held (a new conversation); the others were made while the one
    # before was still in the pipeline: held longer, so that more messages join them
    settings = app.settings
    assert [hold for _, _, hold in backend.sent] == [0.0] + [
        settings.append_coalesce_busy_ms / 1000
    ] * 4
    assert backend.held == [False, True, True, True, True]  # each after the one before
    for op, _, _ in backend.sent:
        _run(inline_api, op)
        completed(inline_api, {"operation_id": op})
    state = snapshot(pool, agent_id)
    assert state["order"] == [m["message_id"] for m in chat]
    assert len({(u[0], u[1]) for u in state["units"]}) == len(state["units"]) > 0
    assert {u[0] for u in state["units"]} <= set(range(len(chat)))
    # the pipeline has caught up and the conversation paused: the next operation starts at once
    _pause(pool, agent_id)
    later = {**chat[-1], "message_id": "later", "event_date": "2024-03-01T11:00:00Z"}
    _append(app, pool, agent_id, [later])
    assert (backend.sent[-1][2], backend.held[-1]) == (0.0, False)


def _pause(pool: Any, agent_id: str, minutes: int = 2) -> None:
    """As if the conversation had last been written `minutes` ago."""
    with pool.connection() as conn:
        conn.execute(
            "UPDATE documents SET updated_at = now() - make_interval(mins => %s) "
            "WHERE agent_id = %s AND document_id = 'chat'",
            (minutes, agent_id),
        )


def test_only_a_burst_is_held(inline_api: Any, pool: Any, agent_id: str) -> None:
    """The coalescing hold is for a conversation written to in quick succession; a live chat's
    message after a pause, with the pipeline caught up, starts at once."""
    window = 60.0  # wide, so that this test's own pace is a burst
    app, backend = _app(inline_api, pool, append_coalesce_ms=window * 1000)
    chat = messages()
    first = _append(app, pool, agent_id, chat[0:1]).operation_id
    _run(inline_api, first)
    completed(inline_api, {"operation_id": first})
    burst = _append(app, pool, agent_id, chat[1:2]).operation_id
    _run(inline_api, burst)
    completed(inline_api, {"operation_id": burst})
    _pause(pool, agent_id)
    paused = _append(app, pool, agent_id, chat[2:3]).operation_id
    assert [op for op, _, _ in backend.sent] == [first, burst, paused]
    assert [hold for _, _, hold in backend.sent] == [0.0, window, 0.0]
    assert backend.held == [False, False, False]


def test_an_operation_held_after_a_busy_one_is_released_by_its_embed(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """The previous operation's embed sends the held one's extract at once; the delayed extract
    then does nothing. Not released, the delayed extract claims it (and again when redelivered);
    a later release leaves it alone."""
    app, backend = _app(inline_api, pool)
    worker = Pipeline(app.settings, pool, backend=backend)  # its hand-offs are collected
    first = _append(app, pool, agent_id, messages(0, 2)).operation_id
    assert worker.run(Stage.EXTRACT, first) is Stage.EMBED
    second = _append(app, pool, agent_id, messages(2, 3)).operation_id
    assert _append(app, pool, agent_id, messages(3, 4)).operation_id == second  # joins it
    assert backend.held == [False, True]
    assert backend.sent[-1] == (second, False, app.settings.append_coalesce_busy_ms / 1000)

    assert worker.run(Stage.EMBED, first) is Stage.ENTITIES
    assert backend.sent[-1] == (second, False, 0.0) and backend.held[-1] is False  # released
    assert not worker.claim_held(second)  # the delayed extract: released first, it does nothing

    assert worker.run(Stage.EXTRACT, second) is Stage.EMBED
    third = _append(app, pool, agent_id, messages(4, 5)).operation_id
    assert backend.held[-1] is True
    assert worker.claim_held(third) and worker.claim_held(third)  # the bound came first
    sent = len(backend.sent)
    assert worker.run(Stage.EMBED, second) is Stage.ENTITIES
    assert len(backend.sent) == sent  # claimed by its delayed extract: not released again

    for op in (first, second, third):
        _run(inline_api, op)
        completed(inline_api, {"operation_id": op})
    assert snapshot(pool, agent_id)["order"] == [m["message_id"] for m in messages(0, 5)]


def test_an_append_held_after_a_whole_post_is_released_by_its_embed(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    app, backend = _app(inline_api, pool)
    worker = Pipeline(app.settings, pool, backend=backend)
    whole = [MemoryItem(**m) for m in messages(0, 3)]
    with pool.connection() as conn:
        post = ingest.ingest(app, conn, Scope(), agent_id, whole, "chat").operation_id
    assert worker.run(Stage.EXTRACT, post) is Stage.EMBED
    held = _append(app, pool, agent_id, messages(3, 4)).operation_id
    assert backend.held[-1] is True
    assert worker.run(Stage.EMBED, post) is Stage.ENTITIES
    assert backend.sent[-1] == (held, False, 0.0) and not worker.claim_held(held)
    for op in (post, held):
        _run(inline_api, op)
        completed(inline_api, {"operation_id": op})
    assert snapshot(pool, agent_id)["order"] == [m["message_id"] for m in messages(0, 4)]


def test_coalescing_off_makes_an_operation_per_append_without_delay(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    app, backend = _app(inline_api, pool, append_coalesce_messages=1)
    ops = [_append(app, pool, agent_id, messages(i, i + 1)).operation_id for i in range(3)]
    assert len(set(ops)) == 3
    assert backend.sent == [(op, False, 0.0) for op in ops]


def test_a_join_and_the_start_of_extract_exclude_each_other(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """A join holds the operation row until it commits; the extract's start waits for it and
    then reads the joined message. Once the start has committed, nothing joins."""
    app, _ = _app(inline_api, pool)
    pipeline = inline_api.app.state.backend.pipeline
    op = _append(app, pool, agent_id, messages(0, 2)).operation_id
    seen: list[list[str]] = []

    def start_extract() -> None:
        with pool.connection() as conn:
            job = pipeline.begin(conn, Stage.EXTRACT, op)
            rows = message_store.claimed(conn, job.document["id"], op)
            seen.append([r["message_id"] for r in rows])

    # the append's own transaction is a savepoint of this one, which commits at the end
    with pool.connection() as conn, conn.transaction():
        joined = ingest.append(
            app, conn, Scope(), agent_id, "chat", [MemoryItem(**m) for m in messages(2, 3)]
        )
        assert joined.operation_id == op
        starter = threading.Thread(target=start_extract)
        starter.start()
        starter.join(0.5)
        assert starter.is_alive()  # waiting for the join's row lock
    starter.join(10)
    assert seen == [["m00", "m01", "m02"]]
    with pool.connection() as conn:
        assert not append_operations.join(conn, op, 1, backfill=False, max_items=32)
    assert _append(app, pool, agent_id, messages(3, 4)).operation_id != op


def _chunk_vectors(pool: Any, agent_key: str) -> dict[str, list[float]]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT text, embedding::text AS v FROM conversation_chunks WHERE agent_id = %s",
            (agent_key,),
        ).fetchall()
    return {r["text"]: [round(float(x), 4) for x in r["v"].strip("[]").split(",")] for r in rows}


def test_an_index_leaves_messages_another_operation_is_still_extracting_to_it(
    inline_api: Any, pool: Any, agent_id: str
) -> None:
    """Two appends side by side: the first one's index stage runs while the second one's units
    are extracted but not embedded. It indexes its own messages only (no chunk text embedded
    for want of units); the second indexes the rest, and the conversation's chunks, vectors
    included, are those of the whole post."""
    whole, live = f"{agent_id}-whole", f"{agent_id}-live"
    body = {"agent_id": whole, "document_id": "chat", "items": messages(), "title": "Trip"}
    completed(inline_api, inline_api.post("/api/memories/batch", json=body).json())
    app, _ = _app(inline_api, pool, append_coalesce_messages=1)
    first = _append(app, pool, live, messages(0, 6), title="Trip").operation_id
    second = _append(app, pool, live, messages(6, 12), title="Trip").operation_id
    pipeline = inline_api.app.state.backend.pipeline
    assert pipeline.run(Stage.EXTRACT, second) is Stage.EMBED  # extracted, not embedded
    _run(inline_api, first)
    counts = completed(inline_api, {"operation_id": first})["counts"]
    covered = {m for _, covers in snapshot(pool, live)["chunks"] for m in covers}
    assert covered and covered <= {m["message_id"] for m in messages(0, 6)}
    assert counts["messages_indexed"] == len(covered)
    inline_api.app.state.backend.enqueue(Stage.EMBED, second)
    completed(inline_api, {"operation_id": second})
    assert snapshot(pool, live)["chunks"] == snapshot(pool, whole)["chunks"]
    assert _chunk_vectors(pool, live) == _chunk_vectors(pool, whole)
