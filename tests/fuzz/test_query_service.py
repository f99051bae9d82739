"""Schema fuzzing of the query service (search, think): generated requests, valid and invalid,
against the real app in-process on PostgreSQL with the real embedding model and a fake LLM.

The fuzz database holds a few memories for a known agent, so that some generated searches
find something; the rest search agents that do not exist (which must answer 200, empty)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis

from memora.basics.config import Settings
from tests.fuzz.support import CHECKS, FUZZ_SETTINGS, AppSlot

pytestmark = pytest.mark.integration


def _spec() -> dict[str, Any]:
    from services.api.query_app import create_app

    return create_app(Settings(database_url="postgresql://unused")).openapi()


SLOT = AppSlot()
schema: schemathesis.BaseSchema = schemathesis.openapi.from_dict(_spec())
schema.app = SLOT


@pytest.fixture(scope="module")
def query_service(fuzz_settings: Settings, fuzz_pool: Any, fuzz_pipeline: Any) -> Iterator[None]:
    from memora.basics.models import MemoryItem
    from memora.basics.stages import INGEST_STAGES
    from memora.basics.tenancy import DEFAULT_SCOPE
    from memora.pipeline.backend import InlineBackend
    from memora.usecases.ingest import accept_batch
    from services.api.query_app import create_app

    backend = InlineBackend(fuzz_pipeline)
    items = [
        MemoryItem(content="Alice: I moved to Lisbon last May and started at Google."),
        MemoryItem(content="Bob: I think remote work is great; I climbed Half Dome."),
    ]
    with fuzz_pool.connection() as conn:
        accepted = accept_batch(conn, DEFAULT_SCOPE, "0", items, "fuzz-seed")
    if accepted.needs_processing:
        backend.enqueue(INGEST_STAGES[0], accepted.operation_id)
    # opinions from think are stored inline, not through Celery
    app = create_app(fuzz_settings, pool=fuzz_pool, backend=backend)
    SLOT.app = app
    yield


@schema.parametrize()
@FUZZ_SETTINGS
def test_query_service_conforms_to_its_schema(case: Any, query_service: None) -> None:
    case.call_and_validate(checks=CHECKS)
