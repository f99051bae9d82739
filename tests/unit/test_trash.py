"""The trash's pure parts (issue 57, item 2): when a trashed document is deleted for real, the
settings that say so, the job that does it, the webhook events that tell, and a hard delete's
answer left exactly as it was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_args
from uuid import uuid4

import pytest
from pydantic import ValidationError

from memora.basics.config import Settings
from memora.jobs import JOBS
from memora.store.trash import Moved
from memora.usecases.documents import purge_after
from memora.webhooks.events import EVENT_TYPES
from memora_client.models.webhooks import WebhookEvent
from services.api.schemas.memories import DeleteResponse
from services.api.schemas.webhooks import EventType
from services.workers.celery_app import create_celery

TRASHED = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_trashed_document_is_kept_for_the_retention() -> None:
    assert purge_after(Settings(), TRASHED) == TRASHED + timedelta(days=30)
    assert purge_after(Settings(trash_retention_days=1.5), TRASHED) == TRASHED + timedelta(hours=36)
    assert purge_after(Settings(), None) is None  # a live document


def test_the_retentions_settings() -> None:
    assert Settings().temporary_chat_retention_days == 30
    for off in ("off", "none", ""):
        assert Settings(temporary_chat_retention_days=off).temporary_chat_retention_days is None
    for bad in (0, -1):
        with pytest.raises(ValidationError):
            Settings(trash_retention_days=bad)
        with pytest.raises(ValidationError):
            Settings(temporary_chat_retention_days=bad)


def test_the_expiry_job_is_scheduled_by_its_interval() -> None:
    spec = JOBS["document_expiry"]
    assert spec.interval_seconds(Settings(document_expiry_interval_seconds=60)) == 60
    schedule = create_celery(Settings()).conf.beat_schedule
    assert schedule["document_expiry"]["schedule"] == 3600
    off = create_celery(Settings(document_expiry_interval_seconds=0)).conf.beat_schedule
    assert "document_expiry" not in off


def test_moved_counts_the_units_of_every_status() -> None:
    moved = Moved({"active": [uuid4(), uuid4()], "superseded": [uuid4()]}, messages=3, chunks=2)
    assert moved.unit_count == 3
    assert Moved({}, 0, 0).unit_count == 0


def test_the_trash_events_are_subscribable_everywhere() -> None:
    assert {"document.trashed", "document.restored"} <= set(EVENT_TYPES)
    assert set(get_args(EventType)) == set(EVENT_TYPES) == set(get_args(WebhookEvent))


def test_a_hard_delete_answers_the_four_fields_it_always_did() -> None:
    hard = DeleteResponse(success=True, agent_id="a", document_id="d", deleted={"remaining": 0})
    assert set(hard.model_dump(exclude_unset=True)) == {
        "success", "agent_id", "document_id", "deleted"
    }  # fmt: skip
    soft = DeleteResponse(
        success=True, agent_id="a", document_id="d", deleted={}, state="absent",
        trashed_at=None, purge_after=None,
    )  # fmt: skip
    assert set(soft.model_dump(exclude_unset=True)) == {
        "success", "agent_id", "document_id", "deleted", "state", "trashed_at", "purge_after"
    }  # fmt: skip
