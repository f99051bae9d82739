"""Think (seed 000 §4.3): the question, and the answer with what it was based on."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from memora.basics.models import (
    AgentId,
)
from memora.retrieval.filters import Filters
from memora.think.reasoning import NETWORKS, REFLECTION
from memora.usecases.think import ThinkQuery, Thought
from services.api.schemas.search import AsOf
from services.api.schemas.usage import LLMUsage


class ThinkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: AgentId
    query: Annotated[str, Field(min_length=1, max_length=2000)]
    thinking_budget: Annotated[int, Field(ge=1, le=1000)] = 50
    top_k: Annotated[int, Field(ge=1, le=100)] = 10
    reranker: Literal["heuristic", "cross-encoder"] = "heuristic"
    context: Annotated[str | None, Field(max_length=5000)] = None
    filters: Annotated[
        Filters | None, Field(description="metadata filters of the searches (as /api/search)")
    ] = None
    as_of: AsOf = None
    include_reflections: Annotated[
        bool,
        Field(
            description="also search the agent's reflections (insights drawn by reflect) "
            "and give them to the LLM; those found are returned under based_on.reflection"
        ),
    ] = True
    follow_up: Annotated[
        bool,
        Field(
            description="a follow-up round before the answer, as /api/search's: the LLM plans "
            "up to MEMORA_FOLLOW_UP_QUERIES queries from the facts found, each searched on "
            "every network and fused with the first round (one more call in `usage`)"
        ),
    ] = False

    def to_query(self) -> ThinkQuery:
        return ThinkQuery(
            self.agent_id, self.query, self.thinking_budget, self.top_k, self.reranker,
            self.context, self.filters, self.as_of, self.include_reflections, self.follow_up,
        )  # fmt: skip


class BasedOn(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: UUID
    text: str
    weight: float
    event_date: datetime | None = None
    context: str | None = None
    confidence: float | None = None


class NewOpinion(BaseModel):
    statement: str
    reasons: list[str]
    confidence: float
    stance: str
    previous_id: UUID | None = None


class ThinkResponse(BaseModel):
    text: str
    based_on: dict[str, list[BasedOn]]
    new_opinions: list[NewOpinion]
    opinions_operation_id: UUID | None = None
    opinion_error: str | None = None
    usage: LLMUsage = Field(default_factory=LLMUsage)

    @classmethod
    def of(cls, thought: Thought) -> ThinkResponse:
        result = thought.result
        return cls(
            text=result.text,
            based_on={  # the three networks always; reflections when some were found
                n: [BasedOn.model_validate(e) for e in result.based_on.get(n, [])]
                for n in (*NETWORKS, REFLECTION)
                if n in NETWORKS or result.based_on.get(n)
            },
            new_opinions=[NewOpinion.model_validate(o.model_dump()) for o in result.new_opinions],
            opinions_operation_id=thought.opinions_operation_id,
            opinion_error=result.opinion_error,
            usage=LLMUsage(**thought.usage),
        )
