"""The read side: the query service's read routes (search, recall, conversation search) read a
streaming replica when `MEMORA_READ_DATABASE_URL` names one, the primary otherwise or when the
replica cannot serve (`memora.db.replica`), and say which in `X-Memora-Read-Source`. The write
API's graph reads choose the same way (`read_routing`, services.api.deps.ReadConnDep)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar
from uuid import UUID

import psycopg
from fastapi import Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from psycopg_pool import PoolTimeout

from memora.basics import metrics
from memora.basics.config import Settings
from memora.basics.tenancy import Scope
from memora.db.pool import Pool, make_pool
from memora.db.replica import ReadRouting
from memora.pipeline.context import AppContext
from memora.retrieval import Retriever, pool_size_for
from memora.store.generations import GenerationChanged

log = logging.getLogger(__name__)
T = TypeVar("T")


def _observe(source: str, reason: str, waited: float, after_operation: object) -> None:
    """`reason`: replica, or why the primary: no_replica, replica_down, replica_lagging,
    not_replayed (docs/scaling.md), replica_failed (the replica failed the read itself)."""
    metrics.READS.labels(source, reason).inc()
    if after_operation is not None:
        metrics.READ_AFTER_WAIT.observe(waited)


SOURCE_HEADER = "X-Memora-Read-Source"
PENDING_HEADER = "X-Memora-Operation-Pending"


@dataclass(frozen=True)
class ReadSide:
    """What a read route reads through: the retriever and the use cases' context of one
    database."""

    retriever: Retriever
    context: AppContext


Renew = Callable[["Reads"], "Reads | None"]


class Reads:
    def __init__(
        self,
        routing: ReadRouting,
        primary: ReadSide,
        replica: ReadSide | None,
        renew: Renew | None = None,
    ) -> None:
        self.routing, self.primary, self.replica = routing, primary, replica
        self.renew = renew

    async def run(
        self,
        response: Response,
        scope: Scope,
        after_operation: UUID | None,
        read: Callable[[ReadSide], T],
    ) -> T:
        """`_run`, once more on a renewed read side when a `memora reembed` switch overtook
        the read (its query embedded by the retired model: `renew` gives the read side of
        the live one, None when the live generation is still this side's)."""
        try:
            return await self._run(response, scope, after_operation, read)
        except (GenerationChanged, psycopg.DataError):
            # a query of another dimension than the vectors' fails before the check
            renewed = await run_in_threadpool(self.renew, self) if self.renew else None
            if renewed is None:
                raise
            log.info("the embedding generation changed: the read runs again with its model")
            return await renewed._run(response, scope, after_operation, read)

    async def _run(
        self,
        response: Response,
        scope: Scope,
        after_operation: UUID | None,
        read: Callable[[ReadSide], T],
    ) -> T:
        """`read` on the side chosen; on the primary again when the replica fails it (it went
        away since its last check, or cancelled the read replaying a conflicting change)."""
        side = await self.side(response, scope, after_operation)
        try:
            return await run_in_threadpool(read, side)
        except (psycopg.OperationalError, PoolTimeout):
            if side is self.primary:
                raise
            log.warning("a read on the replica failed: read again on the primary", exc_info=True)
            self.routing.mark_down()
            response.headers[SOURCE_HEADER] = "primary"
            _observe("primary", "replica_failed", 0.0, None)
            return await run_in_threadpool(read, self.primary)

    async def side(
        self, response: Response, scope: Scope, after_operation: UUID | None
    ) -> ReadSide:
        """Where this read goes (waiting for `after_operation` when named), said in the
        response's headers and the metrics."""
        if self.replica is None and after_operation is None:
            return self.primary  # nothing to choose, nothing to wait for
        choice = await run_in_threadpool(self.routing.choose, scope.tenant_id, after_operation)
        response.headers[SOURCE_HEADER] = choice.source
        if choice.pending:
            response.headers[PENDING_HEADER] = "true"
        _observe(choice.source, choice.reason, choice.waited, after_operation)
        return self.replica if choice.source == "replica" and self.replica else self.primary

    def record_lag(self) -> None:
        """The replica's lag on /metrics (-1: it does not answer)."""
        lag = self.routing.state().lag if self.replica is not None else None
        metrics.READ_REPLICA_LAG.set(-1.0 if lag is None else lag)

    def close(self, *, pool: bool = True) -> None:
        """`pool`: the replica's pool too (not when a renewed read side goes on with it)."""
        self.routing.close()
        if self.replica is not None:
            self.replica.retriever.close()
            if pool:
                self.replica.context.pool.close()


def replica_pool(settings: Settings, name: str = "query-replica") -> Pool | None:
    if not settings.read_database_url:
        return None
    return make_pool(
        settings.read_database_url,
        min_size=settings.db_pool_min,
        max_size=max(settings.db_pool_max, pool_size_for(settings)),
        name=name,
        # a read the replica cannot take within a second is read on the primary (Reads.run)
        timeout=1.0,
        row_security=settings.row_security,
    )


def build_reads(
    settings: Settings, primary: ReadSide, read_pool: Pool | None, renew: Renew | None = None
) -> Reads:
    """The read side over the primary's retriever and context and, when there is a replica,
    a retriever and context on it (accesses recorded and models shared through the
    primary's)."""
    s = settings
    routing = read_routing(s, primary.context.pool, read_pool)
    replica = None
    if read_pool is not None:
        base = primary.retriever
        retriever = Retriever(
            s, read_pool, base.embedder, access=base.access, rerankers=base.rerankers,
            generation=base.generation,
        )  # fmt: skip
        ctx = primary.context
        context = AppContext(s, read_pool, ctx.backend, llm=ctx.llm, embedder=base.embedder)
        replica = ReadSide(retriever, context)
    return Reads(routing, primary, replica, renew)


def read_routing(settings: Settings, primary: Pool, read_pool: Pool | None) -> ReadRouting:
    return ReadRouting(
        primary,
        read_pool,
        max_lag=settings.read_max_lag_seconds,
        replay_wait=settings.read_after_wait_ms / 1000,
        operation_timeout=settings.read_after_timeout_seconds,
    )


async def _reads(request: Request) -> Reads:
    reads: Reads = request.app.state.reads
    return reads


ReadsDep = Annotated[Reads, Depends(_reads)]
