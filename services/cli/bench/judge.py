"""The judge LLM: grades an answer against the expected one, yes or no.

Its endpoint: `MEMORA_JUDGE_LLM_PROVIDER` (openai, groq or ollama: a default base URL),
`_BASE_URL`, `_API_KEY` and `_MODEL` (the seed's names without the MEMORA_ prefix work too);
with none of them set, the main LLM (`MEMORA_LLM_*`). Read from the environment here until the
shared settings carry them. Calls go through the core's LLM client: its retries, back-off and
timeouts (`MEMORA_LLM_*`) apply.
"""

from __future__ import annotations

import os

from memora.basics.config import Settings
from memora.nlp.llm import LLMClient, Message

MARKER = "GRADE THE RESPONSE"  # in every judge prompt (the tests' fake LLM answers it)
PROVIDER_URLS = {
    "openai": None,
    "groq": "https://api.groq.com/openai/v1",
    "ollama": "http://localhost:11434/v1",
}
# What counts as correct, per kind of question (LoCoMo categories, LongMemEval types).
GUIDANCE = {
    "temporal": "Dates, durations and orderings must match; other wording or date formats "
    "are fine, and so is an off-by-one error in a count of days, weeks or months.",
    "temporal-reasoning": "Dates, durations and orderings must match; an off-by-one error in "
    "a count of days, weeks or months is fine.",
    "knowledge-update": "The expected answer is the latest information; a response that also "
    "mentions older information is correct as long as it gives the latest as current.",
    "single-session-preference": "The expected answer is a rubric of what a personalised "
    "response should take into account; it is correct when it follows the rubric, even "
    "without covering every point.",
    "abstention": "The information is not in the memories: the response is correct only when "
    "it says it does not know, or that the question cannot be answered from what it knows.",
}
DEFAULT_GUIDANCE = (
    "The response is correct when it contains the expected answer or something equivalent "
    "(other wording is fine); it is wrong when it misses it, contradicts it or only hedges."
)


def _env(name: str) -> str | None:
    return os.environ.get(f"MEMORA_{name}") or os.environ.get(name) or None


def judge_settings(base: Settings) -> Settings | None:
    """The judge's LLM settings, or None when neither a judge nor a main LLM is configured."""
    provider = (_env("JUDGE_LLM_PROVIDER") or "").lower()
    key, model, url = _env("JUDGE_LLM_API_KEY"), _env("JUDGE_LLM_MODEL"), _env("JUDGE_LLM_BASE_URL")
    if provider and provider not in PROVIDER_URLS:
        raise ValueError(f"JUDGE_LLM_PROVIDER must be one of {', '.join(PROVIDER_URLS)}")
    if provider or key or url:
        base = base.model_copy(
            update={
                "llm_base_url": url or PROVIDER_URLS.get(provider),
                "llm_api_key": key,
                "llm_model": model or base.llm_model,
            }
        )
    elif model:
        base = base.model_copy(update={"llm_model": model})
    return base if base.llm_configured else None


def prompt(category: str, question: str, expected: str, response: str) -> list[Message]:
    guidance = GUIDANCE.get(category, DEFAULT_GUIDANCE)
    return [
        {
            "role": "system",
            "content": "You grade the answers of a memory assistant. Reply with one word: "
            "yes if the response is correct, no if it is not.",
        },
        {
            "role": "user",
            "content": f"{MARKER} to the question.\n{guidance}\n\nQuestion: {question}\n"
            f"Expected answer: {expected}\nResponse: {response}\n\nIs the response correct? "
            "Answer yes or no.",
        },
    ]


class Judge:
    def __init__(self, settings: Settings) -> None:
        self.client = LLMClient(settings)

    def grade(self, category: str, question: str, expected: str, response: str) -> tuple[bool, str]:
        """(correct, the judge's verdict as it answered)."""
        verdict = self.client.complete_text("judge", prompt(category, question, expected, response))
        return verdict.strip().lower().lstrip("*\"' ").startswith("yes"), verdict.strip()
