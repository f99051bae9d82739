"""Retry-After as `memora backfill` reads it (delta-seconds or an HTTP date)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from services.cli.backfill.posting import retry_after


def _answer(status: int, value: str | None) -> httpx.Response:
    headers = {"Retry-After": value} if value is not None else {}
    return httpx.Response(status, headers=headers)


@pytest.mark.parametrize(("value", "seconds"), [("7", 7.0), ("0", 0.0), (" 12 ", 12.0)])
def test_delta_seconds(value: str, seconds: float) -> None:
    assert retry_after(_answer(429, value)) == seconds


def test_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    wait = retry_after(_answer(503, when))
    assert wait is not None and 25 <= wait <= 31


def test_a_date_in_the_past_means_now() -> None:
    when = format_datetime(datetime.now(UTC) - timedelta(minutes=5), usegmt=True)
    assert retry_after(_answer(503, when)) == 0.0


@pytest.mark.parametrize("value", [None, "", "soon", "-3"])
def test_absent_or_unreadable(value: str | None) -> None:
    assert retry_after(_answer(429, value)) is None
