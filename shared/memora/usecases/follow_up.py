"""Search with a follow-up round (issue 59: multi-hop retrieval, better with an LLM).

A question that needs two memories ("Where did Caroline move from?": "I moved from my home
country" and "a gift from my grandma in Sweden") often finds the first and ranks the second far
below: nothing in the question names it. With an LLM configured, a search may ask for a second
round: the LLM reads the question and what the first round found, and writes up to
`MEMORA_FOLLOW_UP_QUERIES` short queries for what is still missing (the other hop of a bridge,
the other person of a comparison, the other occasions of a list, what an inference rests on),
or none when the memories already answer it. Each query runs through the same read path, in
parallel, and the rounds' lists are fused by reciprocal rank (every round counts alike, the
first winning ties), then cut to `top_k` and the token budget.

The default search makes no LLM call; this one makes one (`usage` says what it cost) and waits
for it. With no LLM configured it is refused before any work (`LLMNotConfigured`); when the LLM
fails (unavailable after its retries, an answer that never validates), the first round stands
and `FollowedUp.failed` says why: the round is an addition, and the search has its answer.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypeVar
from uuid import UUID

from pydantic import BaseModel, Field

from memora.nlp import llm
from memora.nlp.llm import LLMClient, LLMError, Message
from memora.retrieval import Retriever, SearchOutcome, SearchParams
from memora.retrieval.scoring import fitting

log = logging.getLogger(__name__)
SHOWN = 10  # first-round memories the LLM reads
SHOWN_CHARS = 400  # of each

FOLLOW_UP_MARKER = "You help a memory search answer questions that may need more than one"
SYSTEM = (
    FOLLOW_UP_MARKER
    + """ memory.
You get a QUESTION and the MEMORIES a first search found for it (numbered, dated, best first).
Write up to {n} short search queries for what is still missing to answer the question:
- the other hop of a bridge: the place, person, event or thing the found memories point at;
- the other person of a comparison ("both", "in common");
- the other occasions of a list or a count;
- for a question asking what is likely, the interests, habits, values or experiences the
  answer would rest on.
Write each query as the memories would say it, in plain words, naming who it is about; do not
repeat the question. Reply {{"queries": []}} when the memories already answer it."""
)


class FollowUpQueries(BaseModel):
    queries: list[str] = Field(default_factory=list)


@dataclass
class FollowedUp:
    outcome: SearchOutcome
    queries: list[str]  # the follow-up queries run (none: the first round stands)
    usage: dict[str, int] = field(default_factory=dict)  # the LLM calls: `llm.tokens_of`
    failed: LLMError | None = None  # why no round was planned, when the LLM failed


def search_with_follow_up(
    retriever: Retriever, client: LLMClient, params: SearchParams, max_queries: int
) -> FollowedUp:
    """`params`' search, then the follow-up round the LLM plans from its results."""
    first = retriever.search(params)
    with llm.calls_made() as calls:
        try:
            queries = plan(
                client, params.query, first.hits[:SHOWN], max_queries, asked=params.reference_time
            )
        except LLMError as exc:
            log.warning("follow-up round not planned: %s", exc)
            return FollowedUp(first, [], llm.tokens_of(calls), exc)
    if not queries:
        return FollowedUp(first, [], llm.tokens_of(calls))
    again = replace(params, trace=False)
    with ThreadPoolExecutor(len(queries), thread_name_prefix="memora-follow-up") as threads:
        found = threads.map(lambda q: retriever.search(replace(again, query=q)).hits, queries)
        rounds = [first.hits, *found]
    fused = fuse_rounds(rounds, retriever.settings.rrf_k)[: params.top_k]
    max_tokens = params.max_tokens or retriever.settings.search_max_tokens
    kept = fused[: fitting([h.text for h in fused], max_tokens, retriever.embedder.count_tokens)]
    trace = first.trace
    if trace is not None:
        trace = {
            **trace,
            "follow_up": {
                "queries": queries,
                "rounds": [[str(h.id) for h in hits] for hits in rounds],
                "selected": [str(h.id) for h in kept],
            },
        }
    return FollowedUp(SearchOutcome(kept, trace), queries, llm.tokens_of(calls))


class Found(Protocol):
    """A memory a round found: a search's `Hit`, think's `Evidence` (dataclasses)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def id(self) -> UUID: ...
    @property
    def text(self) -> str: ...
    @property
    def event_date(self) -> datetime | None: ...
    @property
    def weight(self) -> float: ...


F = TypeVar("F", bound=Found)


def plan(
    client: LLMClient,
    question: str,
    hits: Sequence[Found],
    max_queries: int,
    *,
    asked: datetime | None = None,
) -> list[str]:
    """The LLM's follow-up queries for `question` (asked at `asked`, the search's reference
    time, when it has one) given the first round's `hits`: at most `max_queries`, stripped,
    without repeats or the question itself."""
    if max_queries <= 0:
        return []
    when = f" (asked on {asked:%Y-%m-%d})" if asked is not None else ""
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM.format(n=max_queries)},
        {"role": "user", "content": f"QUESTION{when}: {question}\n\nMEMORIES:\n{_listed(hits)}"},
    ]
    planned = client.complete_json("search", messages, FollowUpQueries)
    seen = {question.strip().casefold()}
    queries = []
    for query in planned.queries:
        text = " ".join(query.split())[:500]
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            queries.append(text)
    return queries[:max_queries]


def _listed(hits: Sequence[Found]) -> str:
    if not hits:
        return "(none found)"
    return "\n".join(
        f"[{n}] ({f'{h.event_date:%Y-%m-%d}' if h.event_date else 'undated'}) "
        f"{h.text[:SHOWN_CHARS]}"
        for n, h in enumerate(hits, 1)
    )


def fuse_rounds(rounds: Sequence[Sequence[F]], k: int) -> list[F]:
    """The rounds' hits by reciprocal rank fusion, Σ 1 / (k + rank) over the rounds that found
    each (`k`: MEMORA_RRF_K, as the read path's fusion), every round alike; ties go to the
    earlier round's order. Each hit is returned once, as its first round gave it, with that sum
    as its `weight`."""
    score: dict[UUID, float] = defaultdict(float)
    first_seen: dict[UUID, tuple[int, int, F]] = {}
    for n, hits in enumerate(rounds):
        for rank, hit in enumerate(hits, 1):
            score[hit.id] += 1.0 / (k + rank)
            first_seen.setdefault(hit.id, (n, rank, hit))
    order = sorted(score, key=lambda i: (-score[i], first_seen[i][0], first_seen[i][1]))
    return [replace(first_seen[i][2], weight=score[i]) for i in order]
