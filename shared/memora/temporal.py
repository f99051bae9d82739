"""Temporal expressions: normalised with dateparser against a reference time."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from dateparser.date import DateDataParser

_SETTINGS_BASE = {
    "PREFER_DAY_OF_MONTH": "first",
    "PREFER_DATES_FROM": "past",
    "RETURN_AS_TIMEZONE_AWARE": False,
}


def _day_start(value: datetime) -> datetime:
    return value.replace(hour=0, minute=0, second=0, microsecond=0)


def period_range(value: datetime, period: str) -> tuple[datetime, datetime]:
    """The interval [start, end) that a parsed date with this granularity denotes."""
    if period == "year":
        start = datetime(value.year, 1, 1)
        return start, datetime(value.year + 1, 1, 1)
    if period == "month":
        start = datetime(value.year, value.month, 1)
        days = calendar.monthrange(value.year, value.month)[1]
        return start, start + timedelta(days=days)
    if period == "week":
        start = _day_start(value) - timedelta(days=value.weekday())
        return start, start + timedelta(days=7)
    if period == "time":
        return value, value + timedelta(hours=1)
    start = _day_start(value)
    return start, start + timedelta(days=1)


@lru_cache(maxsize=4096)
def _resolve_naive(text: str, base: datetime) -> tuple[datetime, datetime] | None:
    parser = DateDataParser(languages=["en"], settings={**_SETTINGS_BASE, "RELATIVE_BASE": base})
    try:
        data = parser.get_date_data(text)
    except (ValueError, OverflowError, TypeError):
        return None
    if data.date_obj is None:
        return None
    return period_range(data.date_obj, data.period or "day")


def resolve_expression(text: str, base: datetime) -> tuple[datetime, datetime] | None:
    """Resolve e.g. "yesterday", "last week", "May 2023" relative to `base` (aware, UTC)."""
    text = text.strip()
    if not text or len(text) > 80:
        return None
    naive_base = base.astimezone(UTC).replace(tzinfo=None, second=0, microsecond=0)
    resolved = _resolve_naive(text.lower(), naive_base)
    if resolved is None:
        return None
    start, end = resolved
    return start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)
