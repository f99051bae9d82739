"""Search (seed 003 "Search Memories"): /api/search and the per-network variants."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from memora.basics.models import (
    CHANNEL_KEY,
    AgentId,
    Channel,
    FactType,
    StorableText,
    aware,
)
from memora.basics.tenancy import Scope
from memora.retrieval import SearchParams
from memora.retrieval.filters import Filters
from services.api.schemas.usage import LLMUsage

# What /api/search finds: the three networks and, when asked for, the agent's reflections
# (the insights reflect draws from its memories, seed 002 §4.4.4).
SearchableType = FactType | Literal["reflection"]

AfterOperation = Annotated[
    UUID | None,
    Field(
        description="an operation's id (from a write): the read sees what that operation made "
        "searchable, waiting for it and for the read replica to replay it (bounded; "
        "docs/scaling.md, read-your-writes); default: no wait"
    ),
]

AsOf = Annotated[
    datetime | None,
    AfterValidator(aware),
    Field(
        description="what was true at this time (ISO 8601; naive is UTC): memories whose "
        "validity window contains it, superseded ones included; default: what is true now"
    ),
]


class NetworkSearchRequest(BaseModel):
    """The body of /api/world_search, /api/agent_search and /api/opinion_search."""

    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[StorableText, Field(min_length=1, max_length=2000)]
    thinking_budget: Annotated[int, Field(ge=1, le=1000)] = 100
    top_k: Annotated[int, Field(ge=1, le=200)] = 10
    reranker: Literal["heuristic", "cross-encoder"] = "heuristic"
    trace: bool = False
    max_tokens: Annotated[
        int | None,
        Field(ge=1, le=200_000, description="token budget of the results (default 4096)"),
    ] = None
    reference_time: Annotated[
        datetime | None,
        AfterValidator(aware),
        Field(description="the time relative dates in the query refer to (default: now)"),
    ] = None
    filters: Annotated[
        Filters | None,
        Field(
            description='only memories matching these: metadata equality (`{"category": '
            '"identity"}`), one-of lists, numeric ranges (`{"turn": {"gte": 3}}`), '
            "`tags` (`any`/`all`) and `time` (`start`/`end`); applied inside every retriever"
        ),
    ] = None
    channel: Annotated[
        Channel | list[Channel] | None,
        Field(
            description="only memories made from messages said in this channel (or in any of "
            'a list): the metadata filter `{"channel": ...}`'
        ),
    ] = None
    as_of: AsOf = None
    after_operation: AfterOperation = None
    follow_up: Annotated[
        bool,
        Field(
            description="a second round an LLM plans from the first round's results: up to "
            "MEMORA_FOLLOW_UP_QUERIES queries for what the question still needs (the other hop "
            "of a multi-hop question), each searched and fused with the first by reciprocal "
            "rank; needs an LLM (503 without one), and makes one call (`follow_up.usage`)"
        ),
    ] = False

    @model_validator(mode="after")
    def _channel_filter(self) -> NetworkSearchRequest:
        if self.channel is None:
            return self
        flat = self.filters.flat() if self.filters is not None else {}
        if flat.get(CHANNEL_KEY, self.channel) != self.channel:
            raise ValueError("channel and filters.channel differ")
        self.filters = Filters.model_validate({**flat, CHANNEL_KEY: self.channel})
        return self

    def params(self, scope: Scope, fact_types: list[SearchableType]) -> SearchParams:
        return SearchParams(
            scope=scope,
            agent_id=self.agent_id,
            query=self.query,
            fact_types=tuple(dict.fromkeys(fact_types)),
            thinking_budget=self.thinking_budget,
            top_k=self.top_k,
            reranker=self.reranker,
            max_tokens=self.max_tokens,
            reference_time=self.reference_time,
            trace=self.trace,
            filters=self.filters,
            as_of=self.as_of,
        )


class SearchRequest(NetworkSearchRequest):
    fact_type: Annotated[
        list[SearchableType] | None,
        Field(
            min_length=1,
            description='the networks searched (default: "world", "agent" and "opinion"); '
            '"reflection" adds the insights reflect stored',
        ),
    ] = None


class SearchResult(BaseModel):
    id: UUID
    text: str
    context: str | None = None
    event_date: datetime | None = None
    weight: float
    fact_type: SearchableType
    metadata: dict[str, Any] | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None


class FollowUpError(BaseModel):
    code: str  # llm_unavailable, llm_invalid_output, llm_request_rejected
    message: str


class FollowUp(BaseModel):
    """What a search with `follow_up` asked the LLM for, and what that call cost."""

    queries: list[str]  # the follow-up queries searched (none: the first round stands)
    usage: LLMUsage
    error: FollowUpError | None = None  # the LLM failed: the first round stands


class SearchResponse(BaseModel):
    results: list[SearchResult]
    trace: dict[str, Any] | None = None
    follow_up: FollowUp | None = None
