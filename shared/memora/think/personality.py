"""The agent personality framework (seed 000 §4): Big Five traits, bias strength, background.

Pure functions for the think prompt (trait descriptions with the spec's thresholds, the
bias-strength system message) and the LLM-powered background merge (§4.4).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from memora.nlp.llm import LLMClient
from memora.store.agents import DEFAULT_PERSONALITY, TRAITS

BACKGROUND_MAX_CHARS = 500

# How each trait reads in the prompt ("very high openness to new ideas").
TRAIT_PHRASES: dict[str, str] = {
    "openness": "openness to new ideas",
    "conscientiousness": "conscientiousness and organization",
    "extraversion": "extraversion and sociability",
    "agreeableness": "agreeableness and cooperation",
    "neuroticism": "emotional sensitivity",
}

HIGH_BIAS = (
    "Your personality strongly influences your thinking. Let your traits guide how you interpret "
    "facts and form opinions. Don't be afraid to be biased based on your personality."
)
MODERATE_BIAS = (
    "Your personality moderately influences your thinking. Balance your personal traits with "
    "objective analysis."
)
LOW_BIAS = (
    "Your personality has minimal influence on your thinking. Focus primarily on facts while "
    "keeping your traits in mind."
)


def describe_trait(name: str, value: float) -> str:
    """Seed 000 §4.3: ≥0.8 very high, ≥0.6 high, ≥0.4 moderate, ≥0.2 low, else very low."""
    if value >= 0.8:
        return f"very high {name}"
    if value >= 0.6:
        return f"high {name}"
    if value >= 0.4:
        return f"moderate {name}"
    if value >= 0.2:
        return f"low {name}"
    return f"very low {name}"


def bias_message(strength: float) -> str:
    """High (≥0.7), moderate (0.4–0.7) or low (<0.4) personality influence."""
    if strength >= 0.7:
        return HIGH_BIAS
    if strength >= 0.4:
        return MODERATE_BIAS
    return LOW_BIAS


def full_personality(stored: dict[str, Any] | None) -> dict[str, float]:
    """Stored values over the defaults (rows written before a trait existed still work)."""
    merged = dict(DEFAULT_PERSONALITY)
    for key, value in (stored or {}).items():
        if key in merged and isinstance(value, int | float):
            merged[key] = float(value)
    return merged


def personality_lines(personality: dict[str, float]) -> list[str]:
    full = full_personality(personality)
    return [describe_trait(TRAIT_PHRASES[t], full[t]) for t in TRAITS]


def influence_line(personality: dict[str, float]) -> str:
    strength = full_personality(personality)["bias_strength"]
    return (
        f"Personality influence strength: {round(strength * 100)}% "
        "(how much your personality shapes your opinions)"
    )


# ------------------------------------------------------------------- background merging
class MergedBackground(BaseModel):
    background: str = Field(max_length=BACKGROUND_MAX_CHARS)

    @field_validator("background")
    @classmethod
    def _clean(cls, value: str) -> str:
        return value.strip().strip('"').strip()


MERGE_MARKER = "You maintain an AI agent's background"
MERGE_SYSTEM = (
    f"{MERGE_MARKER}: a short first-person description of who the agent is. Merge new "
    "information into the current background. When they conflict, the new information wins and "
    "the old statement is removed; otherwise keep the old statements and add the new ones. "
    "Input may be written in the second person ('You were born in Texas'); always write the "
    "result in the FIRST PERSON ('I was born in Texas'). Be concise: under "
    f"{BACKGROUND_MAX_CHARS} characters."
)


def merge_background(client: LLMClient, current: str, new_info: str) -> str:
    """Seed 000 §4.4: new information overwrites conflicts; first person; < 500 characters."""
    messages = [
        {"role": "system", "content": MERGE_SYSTEM},
        {
            "role": "user",
            "content": (
                f"Current background: {current.strip() or '(empty)'}\n"
                f"New information: {new_info.strip()}\n\n"
                "Merge these, resolving conflicts (new info overwrites old).\n"
                'Output in FIRST PERSON ("I"). Be concise (under 500 characters).'
            ),
        },
    ]
    return client.complete_json("background", messages, MergedBackground).background
