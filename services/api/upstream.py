"""Failures of what the services depend on upstream, as JSON answers: the LLM (503 when it is
not configured or unreachable, 502 when its answer was unusable) and the cross-encoder (503).
Apart from services.api.errors, which the CLI loads too: these import the LLM client and the
read path."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from memora.nlp.llm import LLMError, LLMInvalidOutput, LLMNotConfigured, LLMUnavailable
from memora.retrieval import RerankerUnavailable
from services.api.errors import APIError, answer


def llm_api_error(exc: LLMError) -> APIError:
    if isinstance(exc, LLMNotConfigured):
        return APIError(503, "llm_not_configured", str(exc), {"setting": "MEMORA_LLM_BASE_URL"})
    if isinstance(exc, LLMUnavailable):
        return APIError(503, "llm_unavailable", f"the LLM is unavailable; retry later ({exc})")
    if isinstance(exc, LLMInvalidOutput):
        return APIError(502, "llm_invalid_output", f"the LLM's answer failed validation ({exc})")
    return APIError(502, "llm_request_rejected", str(exc))


def install_upstream_handlers(app: FastAPI) -> None:
    @app.exception_handler(LLMError)
    async def _llm_error(_: Request, exc: LLMError) -> JSONResponse:
        return answer(llm_api_error(exc))

    @app.exception_handler(RerankerUnavailable)
    async def _reranker(_: Request, exc: RerankerUnavailable) -> JSONResponse:
        return answer(APIError(503, "reranker_unavailable", str(exc)))
