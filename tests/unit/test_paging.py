"""Paging cursors: what the API writes it reads back; anything else is a 422, never a 500."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from services.api import paging
from services.api.errors import APIError


@pytest.mark.parametrize(
    "position",
    [
        0,
        1234,
        (datetime(2024, 3, 10, 9, 0, tzinfo=UTC), uuid.uuid4()),
        (
            datetime(2024, 3, 10, 9, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5))),
            uuid.uuid4(),
        ),
    ],
)
def test_round_trip(position: paging.Position) -> None:
    cursor = paging.encode(position)
    assert cursor is not None and "=" not in cursor
    assert paging.decode(cursor) == position


def test_none_and_empty() -> None:
    assert paging.encode(None) is None
    assert paging.decode(None) is None and paging.decode("") is None


@pytest.mark.parametrize(
    "cursor", ["%%%", "abc", "MjAyNC0wMy0xMFQwOTowMDowMHx4", "MjAyNC0wMy0xMFQwOTowMDowMHw", "_w"]
)
def test_garbage_is_invalid_cursor(cursor: str) -> None:
    with pytest.raises(APIError) as caught:
        paging.decode(cursor)
    assert caught.value.status == 422 and caught.value.code == "invalid_cursor"


def test_naive_timestamps_are_refused() -> None:
    naive = paging.encode((datetime(2024, 1, 1), uuid.uuid4()))
    with pytest.raises(APIError):
        paging.decode(naive)
