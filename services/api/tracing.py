"""Server spans for a web app's requests when tracing is on (memora.infra.tracing)."""

from __future__ import annotations

import os

from fastapi import FastAPI

from memora.infra.tracing import configure_tracing

# Probes and scrapes are not traced unless OTEL_PYTHON_FASTAPI_EXCLUDED_URLS says otherwise.
_EXCLUDED = "/health/,/metrics"


def install_tracing(app: FastAPI, service_name: str) -> None:
    """Trace `app`'s requests (and, through the process's instrumentations, what they call)."""
    provider = configure_tracing(service_name)
    if provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor  # only when on

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS", _EXCLUDED),
    )
