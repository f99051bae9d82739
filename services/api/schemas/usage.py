"""What a response says of the LLM calls it made (think, a search with a follow-up round)."""

from __future__ import annotations

from pydantic import BaseModel


class LLMUsage(BaseModel):
    """The LLM calls a response made (think: the answer and the opinions drawn from it; a
    search: its follow-up plan), every HTTP attempt (retries included), with the tokens the
    provider counted: its cost at the provider's prices."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
