"""Schema fuzzing of the write API (schemathesis): generated requests, valid and invalid,
against the real app in-process on PostgreSQL, with the pipeline run inline.

Every response must be a non-5xx with a documented status code and content type, and a body
that matches its schema (4xx bodies too: the routes declare the JSON error format)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis

from memora.basics.config import Settings
from tests.fuzz.support import CHECKS, FUZZ_SETTINGS, AppSlot

pytestmark = pytest.mark.integration


class _NoBackend:
    def enqueue(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("only used to read the OpenAPI document")


def _spec() -> dict[str, Any]:
    from services.api.app import create_app

    return create_app(Settings(database_url="postgresql://unused"), backend=_NoBackend()).openapi()


SLOT = AppSlot()
schema = schemathesis.openapi.from_dict(_spec())
schema.app = SLOT


@pytest.fixture(scope="module")
def write_api(fuzz_settings: Settings, fuzz_pool: Any, fuzz_pipeline: Any) -> Iterator[None]:
    from memora.pipeline.backend import InlineBackend
    from services.api.app import create_app

    SLOT.app = create_app(fuzz_settings, pool=fuzz_pool, backend=InlineBackend(fuzz_pipeline))
    yield


@schema.parametrize()
@FUZZ_SETTINGS
def test_write_api_conforms_to_its_schema(case: Any, write_api: None) -> None:
    case.call_and_validate(checks=CHECKS)
