"""The LLM client of an app (built once, on first use) and LLM failures as JSON HTTP errors."""

from __future__ import annotations

from fastapi import Request

from memora.nlp.llm import LLMClient, LLMError, LLMInvalidOutput, LLMNotConfigured, LLMUnavailable
from services.api.errors import APIError


def llm_client(request: Request) -> LLMClient:
    """The app's client; 503 `llm_not_configured` when no endpoint is configured."""
    state = request.app.state
    client: LLMClient | None = getattr(state, "llm", None)
    if client is None:
        try:
            client = LLMClient.from_settings(state.settings)
        except LLMNotConfigured as exc:
            raise llm_api_error(exc) from exc
        state.llm = client
    return client


def llm_api_error(exc: LLMError) -> APIError:
    if isinstance(exc, LLMNotConfigured):
        return APIError(503, "llm_not_configured", str(exc), {"setting": "MEMORA_LLM_BASE_URL"})
    if isinstance(exc, LLMUnavailable):
        return APIError(503, "llm_unavailable", f"the LLM is unavailable; retry later ({exc})")
    if isinstance(exc, LLMInvalidOutput):
        return APIError(502, "llm_invalid_output", f"the LLM's answer failed validation ({exc})")
    return APIError(502, "llm_request_rejected", str(exc))
