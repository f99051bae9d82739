"""The judge LLM: grades an answer against the expected one, yes or no.

Its endpoint: `JUDGE_LLM_PROVIDER` (openai, groq or ollama: a default base URL), `_BASE_URL`,
`_API_KEY` and `_MODEL` (also with the MEMORA_ prefix); with none of them set, the main LLM
(`MEMORA_LLM_*`): `memora.basics.config.judge_llm_settings`. Calls go through the core's LLM
client: its retries, back-off and timeouts (`MEMORA_LLM_*`) apply.
"""

from __future__ import annotations

from memora.basics.config import Settings, judge_llm_settings
from memora.nlp.llm import LLMClient, Message

MARKER = "GRADE THE RESPONSE"  # in every judge prompt (the tests' fake LLM answers it)
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


def judge_settings(base: Settings) -> Settings | None:
    """The judge's LLM settings (`judge_llm_settings`: JUDGE_LLM_*, else the main LLM), or None
    when neither a judge nor a main LLM is configured."""
    judged = judge_llm_settings(base).apply(base)
    return judged if judged.llm_configured else None


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
