"""Think (seed 000 §4.3): answer a question as the agent, from its memories and personality.

`think()` takes the agent's profile and the evidence already retrieved per network (world,
agent, opinion), builds the prompt of §4.3 (identity, world knowledge, existing opinions, trait
descriptions, influence strength, background, question) with the bias-strength system message,
and asks the LLM. A second, structured call draws the opinions the answer expresses (statement,
reasons, confidence, and whether it revisits an existing opinion). When that second call fails,
the answer is still returned, with no new opinions and the reason in `opinion_error`.
Storing the opinions is the opinions stage's job (memora.think.opinions).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field, field_validator

from memora.basics.models import FACT_TYPES
from memora.nlp.llm import LLMClient, LLMError
from memora.think.opinions import OpinionDraft
from memora.think.personality import (
    bias_message,
    full_personality,
    influence_line,
    personality_lines,
)

log = logging.getLogger("memora.think")

NETWORKS = FACT_TYPES  # think searches each network on its own
REFLECTION = "reflection"  # the lifecycle's insights (seed 002 §4.4.4), searched as a fourth
THINK_MARKER = "You are an AI agent with your own memories"
OPINION_MARKER = "You identify the opinions"


@dataclass(frozen=True)
class Evidence:
    id: UUID
    text: str
    fact_type: str
    weight: float
    event_date: datetime | None = None
    context: str | None = None
    confidence: float | None = None  # opinions

    def line(self) -> str:
        when = f" ({self.event_date.date().isoformat()})" if self.event_date else ""
        conf = f" [confidence: {self.confidence:.2f}]" if self.confidence is not None else ""
        return f"- {self.text}{when}{conf}"


@dataclass(frozen=True)
class Profile:
    agent_id: str
    personality: dict[str, float]
    background: str = ""


@dataclass
class ThinkResult:
    text: str
    based_on: dict[str, list[Evidence]]
    new_opinions: list[OpinionDraft] = field(default_factory=list)
    opinion_error: str | None = None


# ------------------------------------------------------------------------------- prompt
def _section(evidence: list[Evidence]) -> str:
    return "\n".join(e.line() for e in evidence) if evidence else "(nothing yet)"


def think_messages(
    profile: Profile, query: str, based_on: dict[str, list[Evidence]], context: str | None = None
) -> list[dict[str, str]]:
    personality = full_personality(profile.personality)
    system = (
        f"{THINK_MARKER}, experiences, opinions, personality and background. Answer in the first "
        "person, as yourself, grounded in what you know; say so when you do not know something. "
        f"{bias_message(personality['bias_strength'])}"
    )
    traits = "\n".join(f"- {line}" for line in personality_lines(personality))
    parts = [
        "Here's what I know and have experienced:",
        f"MY IDENTITY & EXPERIENCES:\n{_section(based_on.get('agent', []))}",
        f"WHAT I KNOW ABOUT THE WORLD:\n{_section(based_on.get('world', []))}",
        f"MY EXISTING OPINIONS & BELIEFS:\n{_section(based_on.get('opinion', []))}",
    ]
    if based_on.get(REFLECTION):  # the prompt of an agent without reflections is unchanged
        parts.append(f"MY REFLECTIONS (insights I drew from my memories):\n"
                     f"{_section(based_on[REFLECTION])}")  # fmt: skip
    parts += [
        f"Your personality traits:\n{traits}",
        influence_line(personality),
        f"Your background:\n{profile.background.strip() or '(no background given)'}",
    ]
    if context and context.strip():
        parts.append(f"ADDITIONAL CONTEXT:\n{context.strip()}")
    parts.append(f"QUESTION: {query}")
    parts.append(
        "Based on everything I know, believe, and who I am (including my personality and "
        "background), here's what I genuinely think about this question..."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


# ------------------------------------------------------------------- opinion extraction
class ExtractedOpinion(BaseModel):
    statement: str = Field(min_length=3, max_length=1000)
    reasons: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)
    updates: int | None = Field(
        default=None, description="number of the existing opinion it revisits"
    )
    stance: Literal["new", "supports", "contradicts"] = "new"

    @field_validator("stance", mode="before")
    @classmethod
    def _stance(cls, value: Any) -> str:
        return str(value or "new").strip().lower()


class OpinionExtraction(BaseModel):
    opinions: list[ExtractedOpinion]


OPINION_SYSTEM = (
    f"{OPINION_MARKER} that an AI agent expressed in its answer. An opinion is a judgement or "
    "belief the agent holds, not a plain fact. For each opinion give: statement (one "
    "self-contained claim, e.g. 'Remote work improves productivity'), reasons (short phrases "
    "from the answer), confidence (0 to 1: how firmly the answer holds it). If it revisits one "
    "of the EXISTING OPINIONS, set updates to that opinion's number and stance to 'supports' "
    "(the answer reaffirms it) or 'contradicts' (the answer weakens or reverses it); otherwise "
    "updates is null and stance is 'new'. Answer {\"opinions\": []} when there is no opinion."
)


def extract_opinions(
    client: LLMClient, query: str, answer: str, existing: list[Evidence]
) -> list[OpinionDraft]:
    listed = "\n".join(
        f"[{n}] {e.text}"
        + (f" [confidence: {e.confidence:.2f}]" if e.confidence is not None else "")
        for n, e in enumerate(existing, start=1)
    )
    messages = [
        {"role": "system", "content": OPINION_SYSTEM},
        {
            "role": "user",
            "content": f"EXISTING OPINIONS:\n{listed or '(none)'}\n\n"
            f"QUESTION: {query}\n\nANSWER:\n{answer}",
        },
    ]
    result = client.complete_json("opinions", messages, OpinionExtraction)
    drafts = []
    for o in result.opinions:
        previous = (
            existing[o.updates - 1] if o.updates and 1 <= o.updates <= len(existing) else None
        )
        drafts.append(
            OpinionDraft(
                statement=o.statement.strip(),
                reasons=[r.strip() for r in o.reasons if r.strip()],
                confidence=o.confidence,
                previous_id=previous.id if previous else None,
                stance=o.stance if previous else "new",
            )
        )
    return drafts


def think(
    client: LLMClient,
    profile: Profile,
    query: str,
    based_on: dict[str, list[Evidence]],
    context: str | None = None,
) -> ThinkResult:
    """The answer (LLMError propagates) and, best effort, the opinions it expresses."""
    text = client.complete_text("think", think_messages(profile, query, based_on, context))
    result = ThinkResult(text=text, based_on=based_on)
    try:
        result.new_opinions = extract_opinions(client, query, text, based_on.get("opinion", []))
    except LLMError as exc:
        log.warning("opinion extraction failed; answering without new opinions: %s", exc)
        result.opinion_error = f"{type(exc).__name__}: {exc}"
    return result
