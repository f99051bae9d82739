"""Think (seed 000 §4.3, seed 003 "Think and Generate Answer"): answer a question as the agent.

The profile is read (the defaults when the agent has none), the three networks are searched
through the read path in parallel, the LLM answers as the agent, and the opinions it expressed
are recorded as an `opinions` operation and handed to the opinions stage. The answer stands
even when drawing or storing the opinions fails (`opinion_error` says why); an LLM that is not
configured or not reachable raises its `LLMError` before anything is stored.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from memora.basics.models import utcnow
from memora.basics.stages import OperationKind, first_stage
from memora.basics.tenancy import Scope
from memora.nlp import llm
from memora.nlp.llm import LLMClient, LLMError
from memora.pipeline.context import AppContext
from memora.pipeline.handoff import hand_off
from memora.retrieval import Retriever, SearchParams
from memora.retrieval.filters import Filters
from memora.retrieval.types import RerankerName
from memora.store import agents
from memora.think import opinions
from memora.think.personality import full_personality
from memora.think.reasoning import NETWORKS, REFLECTION, Evidence, Profile, ThinkResult
from memora.think.reasoning import think as reason
from memora.usecases import follow_up

log = logging.getLogger("memora.think")


@dataclass(frozen=True)
class ThinkQuery:
    agent_id: str  # as the client names it
    query: str
    thinking_budget: int = 50
    top_k: int = 10
    reranker: RerankerName = "heuristic"
    context: str | None = None
    filters: Filters | None = None  # the searches' metadata filters (as /api/search)
    as_of: datetime | None = None  # answer from what was true then (as /api/search)
    include_reflections: bool = True  # search the agent's reflections too (seed 002 §4.4)
    follow_up: bool = False  # a follow-up round the LLM plans from the first (usecases.follow_up)


@dataclass(frozen=True)
class Thought:
    result: ThinkResult
    opinions_operation_id: UUID | None  # the operation storing its new opinions, if any
    usage: dict[str, int] = field(default_factory=dict)  # its LLM calls: `llm.tokens_of`


def think(app: AppContext, retriever: Retriever, scope: Scope, q: ThinkQuery) -> Thought:
    """The agent's answer to `q`; `retriever`: the query service's read path."""
    client = app.llm.get()  # not configured: refused before any work
    profile = _profile(app, scope, q.agent_id)
    searched = (*NETWORKS, REFLECTION) if q.include_reflections else NETWORKS
    with llm.calls_made() as calls:
        with ThreadPoolExecutor(len(searched), thread_name_prefix="memora-think") as threads:
            based_on = _gather(threads, retriever, scope, q, searched)
            if q.follow_up:
                max_queries = app.settings.follow_up_queries
                based_on = _followed_up(threads, retriever, scope, q, based_on, client, max_queries)
        based_on["opinion"] = _current_opinions(app, scope, q.agent_id, based_on["opinion"])
        result = reason(client, profile, q.query, based_on, q.context)
    operation_id: UUID | None = None
    if result.new_opinions:
        try:
            operation_id = _store_opinions(app, scope, q, profile, result)
        except Exception as exc:  # the answer still goes back
            log.exception("storing opinions failed")
            result.opinion_error = f"storing opinions failed: {type(exc).__name__}"
    return Thought(result, operation_id, llm.tokens_of(calls))


def _profile(app: AppContext, scope: Scope, agent_id: str) -> Profile:
    with app.pool.tenant_connection(scope.tenant_id) as conn:
        row = agents.get_agent(conn, scope, agent_id)
    if row is None:  # think does not create agents; the defaults apply
        return Profile(agent_id, full_personality(None))
    return Profile(agent_id, full_personality(row["personality"]), row["background"] or "")


def _gather(
    threads: ThreadPoolExecutor,
    retriever: Retriever,
    scope: Scope,
    q: ThinkQuery,
    searched: tuple[str, ...],
    query: str | None = None,
) -> dict[str, list[Evidence]]:
    """Each network's evidence for `query` (the question's by default), searched at once."""
    found = threads.map(lambda network: _search(retriever, scope, q, network, query), searched)
    return dict(zip(searched, found, strict=True))


def _followed_up(
    threads: ThreadPoolExecutor,
    retriever: Retriever,
    scope: Scope,
    q: ThinkQuery,
    based_on: dict[str, list[Evidence]],
    client: LLMClient,
    max_queries: int,
) -> dict[str, list[Evidence]]:
    """The follow-up round (memora.usecases.follow_up): planned once from the best facts found
    (world and agent), each query searched on every network, each network's rounds fused."""
    facts = sorted(
        (e for network in NETWORKS if network != "opinion" for e in based_on[network]),
        key=lambda e: -e.weight,
    )
    try:
        queries = follow_up.plan(client, q.query, facts[: follow_up.SHOWN], max_queries)
    except LLMError as exc:  # the answer is still asked for, from the first round
        log.warning("follow-up round not planned: %s", exc)
        return based_on
    if not queries:
        return based_on
    searched = tuple(based_on)
    rounds = [_gather(threads, retriever, scope, q, searched, query) for query in queries]
    k = retriever.settings.rrf_k
    fused = {n: follow_up.fuse_rounds([based_on[n], *(r[n] for r in rounds)], k) for n in searched}
    return {n: found[: q.top_k] for n, found in fused.items()}


def _search(
    retriever: Retriever, scope: Scope, q: ThinkQuery, network: str, query: str | None = None
) -> list[Evidence]:
    params = SearchParams(
        agent_id=q.agent_id,
        scope=scope,
        query=query or q.query,
        fact_types=(network,),
        thinking_budget=q.thinking_budget,
        top_k=q.top_k,
        reranker=q.reranker,
        filters=q.filters,
        as_of=q.as_of,
    )
    return [
        Evidence(h.id, h.text, h.fact_type, h.weight, h.event_date, h.context)
        for h in retriever.search(params).hits
    ]


def _current_opinions(
    app: AppContext, scope: Scope, agent_id: str, found: list[Evidence]
) -> list[Evidence]:
    """Opinions with their confidence; versions a later one superseded are left out."""
    with app.pool.tenant_connection(scope.tenant_id) as conn:
        known = opinions.state(conn, scope, agent_id, [e.id for e in found])
    kept = []
    for e in found:
        confidence, superseded = known.get(e.id, (None, False))
        if not superseded:
            kept.append(
                Evidence(e.id, e.text, e.fact_type, e.weight, e.event_date, e.context, confidence)
            )
    return kept


def _store_opinions(
    app: AppContext, scope: Scope, q: ThinkQuery, profile: Profile, result: ThinkResult
) -> UUID:
    """Record the new opinions (committed), then hand them to the opinions stage."""
    based_on = [e.id for network in NETWORKS for e in result.based_on.get(network, [])]
    with app.pool.tenant_connection(scope.tenant_id) as conn:
        operation_id = opinions.record(
            conn,
            scope,
            q.agent_id,
            result.new_opinions,
            formed_at=utcnow(),
            query=q.query,
            personality=profile.personality,
            based_on=based_on,
        )
    hand_off(app.backend, first_stage(OperationKind.OPINIONS), operation_id)
    return operation_id
