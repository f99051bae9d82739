"""Temporal expressions: normalised with dateparser against a reference time."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
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
        if data.date_obj is None:
            return None
        return period_range(data.date_obj, data.period or "day")
    except (ValueError, OverflowError, TypeError):  # also "in 9999": its year ends in 10000
        return None


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


# ----------------------------------------------------------------------------- query ranges
# Time constraints in search queries (seed 000 §3.1.4, seed 003 "Temporal Queries"): seasons,
# months, years, relative periods and "between X and Y" ranges, resolved against a reference
# time. Words that are also common English ("may", "march", "fall", "spring") count only with
# a date-like neighbour ("in May", "last spring", "May 2023"), so "may I ask" stays a question.

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2,
    "few": 3,
}  # fmt: skip
_AMBIGUOUS = frozenset({"may", "march", "mar", "fall", "spring", "sep", "jan", "dec", "oct"})
_FULL_MONTHS = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUM = r"\d{1,3}|" + "|".join(
    n.replace(" ", r"\ ") for n in sorted(_NUMBERS, key=len, reverse=True)
)
_MOD = r"last|this|next|past|previous|early|late|mid"
_LEAD = r"(?:(?P<lead>in|during|on|of|since|from|throughout|around|by|over)\ )?(?P<the>the\ )?"
_ATOM = rf"""
    (?P<rel>the\ day\ before\ yesterday|yesterday|today|tonight|this\ morning|
        (?:last|this|past|previous|next)\ (?:week(?:end)?|month|year|decade)|
        (?P<agoN>{_NUM})\ (?P<agoU>day|week|month|year)s?\ ago|
        (?:the\ )?(?:past|last)\ (?P<pastN>{_NUM})\ (?P<pastU>day|week|month|year)s?)
  | (?:(?P<smod>{_MOD})\ )?(?P<season>spring|summer|autumn|fall|winter)
        (?:\ (?:of\ )?(?P<syear>(?:19|20)\d\d))?
  | (?P<dday>\d{{1,2}})(?:st|nd|rd|th)?\ (?:of\ )?(?P<dmonth>{_FULL_MONTHS})
        (?:,?\ (?P<dyear>(?:19|20)\d\d))?
  | (?:(?P<mmod>{_MOD})\ )?(?P<month>{_FULL_MONTHS})(?:\ (?P<mday>\d{{1,2}})(?:st|nd|rd|th)?(?!\d))?
        (?:,?\ (?P<myear>(?:19|20)\d\d))?
  | (?P<year>(?:19|20)\d\d)
"""
_ATOM_RE = re.compile(rf"(?<![\w-]){_LEAD}(?:{_ATOM})(?![\w-])", re.VERBOSE | re.I)
_RANGE_RE = re.compile(
    r"(?<![\w-])(?:between|from)\ (?P<a>(?:(?!\ (?:and|to|until|through)\ ).){2,40}?)"
    r"\ (?:and|to|until|through|till)\ (?P<b>.{2,40}?)(?=$|[\s?.!,;])",
    re.VERBOSE | re.I,
)


@dataclass(frozen=True)
class QueryTimeRange:
    """[start, end) in UTC, and the words of the query that stated it."""

    start: datetime
    end: datetime
    expression: str


def _month_range(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1)
    return start, period_range(start, "month")[1]


def _season_range(year: int, first_month: int) -> tuple[datetime, datetime]:
    """Three months from `first_month` of `year` (winter YEAR runs Dec YEAR-1 to Feb YEAR)."""
    if first_month == 12:
        return datetime(year - 1, 12, 1), datetime(year, 3, 1)
    return datetime(year, first_month, 1), datetime(year, first_month + 3, 1)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def _shift_months(value: datetime, months: int) -> datetime:
    index = value.year * 12 + value.month - 1 + months
    return value.replace(year=index // 12, month=index % 12 + 1, day=1)


def _relative(m: re.Match[str], ref: datetime) -> tuple[datetime, datetime] | None:
    text = m.group("rel").lower()
    day = _day_start(ref)
    if m.group("pastN"):  # "the past 3 weeks": a rolling window ending now
        n, unit = _count(m.group("pastN")), m.group("pastU").lower()
        if unit in ("day", "week"):
            return ref - timedelta(days=n * (7 if unit == "week" else 1)), ref
        return (_shift_months(day, -n * (12 if unit == "year" else 1)), ref)
    if m.group("agoN"):  # "3 weeks ago": that week; "two months ago": that month
        n, unit = _count(m.group("agoN")), m.group("agoU").lower()
        if unit in ("day", "week"):
            return period_range(day - timedelta(days=n * (7 if unit == "week" else 1)), unit)
        return period_range(_shift_months(day, -n * (12 if unit == "year" else 1)), unit)
    if text.endswith("weekend"):
        saturday = day - timedelta(days=(day.weekday() - 5) % 7)
        if text.startswith("next"):
            saturday += timedelta(days=7)
        elif not text.startswith("this") and saturday + timedelta(days=2) > ref:
            saturday -= timedelta(days=7)
        return saturday, saturday + timedelta(days=2)
    if text.endswith("decade"):
        start = datetime(ref.year - ref.year % 10, 1, 1)
        if not text.startswith("this"):
            start = start.replace(year=start.year + (10 if text.startswith("next") else -10))
        return start, start.replace(year=start.year + 10)
    found = _resolve_naive(text, ref.replace(second=0, microsecond=0))
    return found


def _atom_range(m: re.Match[str], ref: datetime) -> tuple[datetime, datetime] | None:
    g = {k: (v.lower() if isinstance(v, str) else v) for k, v in m.groupdict().items()}
    mod = g["smod"] or g["mmod"]
    if g["rel"]:
        return _relative(m, ref)
    if g["year"]:
        return datetime(int(g["year"]), 1, 1), datetime(int(g["year"]) + 1, 1, 1)
    if g["dday"]:
        year = int(g["dyear"]) if g["dyear"] else ref.year
        start = datetime(year, MONTHS[g["dmonth"]], min(int(g["dday"]), 28))
        return start, start + timedelta(days=1)
    if g["season"]:
        first = SEASONS[g["season"]]
        if g["syear"]:
            return _season_range(int(g["syear"]), first)
        year = ref.year + (1 if first == 12 and ref.month == 12 else 0)
        start, end = _season_range(year, first)
        if mod in ("last", "past", "previous"):
            while end > ref:
                year -= 1
                start, end = _season_range(year, first)
        elif mod == "next":
            while start <= ref:
                year += 1
                start, end = _season_range(year, first)
        return start, end
    if g["month"]:
        month = MONTHS[g["month"]]
        if g["myear"] or not mod or mod in ("this", "early", "late", "mid"):
            year = int(g["myear"]) if g["myear"] else ref.year  # "in June": this year's
        elif mod == "next":
            year = ref.year + (1 if month <= ref.month else 0)
        else:  # last/past/previous: the latest one before this month
            year = ref.year - (1 if month >= ref.month else 0)
        if g["mday"]:
            start = datetime(year, month, min(int(g["mday"]), 28))
            return start, start + timedelta(days=1)
        start, end = _month_range(year, month)
        if mod == "early":
            return start, start + timedelta(days=10)
        if mod == "late":
            return end - timedelta(days=10), end
        return start, end
    return None


def _plausible(m: re.Match[str]) -> bool:
    """An ambiguous word ("may", "fall") counts only with a modifier, a lead word or a number."""
    word = (m.group("season") or m.group("month") or "").lower()
    if not word:
        return True
    if word in _AMBIGUOUS or (len(word) <= 4 and word not in ("june", "july")):
        return bool(
            m.group("smod")
            or m.group("mmod")
            or m.group("lead")
            or m.group("the")
            or m.group("syear")
            or m.group("myear")
            or m.group("mday")
        )
    return True


def _atoms(
    text: str, ref: datetime, *, in_range: bool = False
) -> list[tuple[re.Match[str], tuple[datetime, datetime]]]:
    found = []
    for m in _ATOM_RE.finditer(text):
        if not in_range and not _plausible(m):
            continue
        resolved = _atom_range(m, ref)
        if resolved is not None:
            if (m.group("lead") or "").lower() == "since":  # "since 2021": up to now
                resolved = (resolved[0], max(resolved[1], ref))
            found.append((m, resolved))
    return found


def parse_query_range(query: str, reference: datetime) -> QueryTimeRange | None:
    """The time constraint a search query states, resolved against `reference`, or None.

    "last spring" → the latest spring that has ended; "in June" → June of the reference year;
    "last year/month/week" → the previous calendar period; "between March and May" → March 1 to
    May 31; "in 2023" → the year. Several expressions give the span covering all of them.
    """
    ref = reference.astimezone(UTC).replace(tzinfo=None)
    spans: list[tuple[int, int, datetime, datetime]] = []
    for r in _RANGE_RE.finditer(query):
        left = _atoms(r.group("a"), ref, in_range=True)
        right = _atoms(r.group("b"), ref, in_range=True)
        if left and right:
            start, end = left[0][1][0], right[-1][1][1]
            if end <= start and not right[-1][0].group("year"):  # "between November and February"
                start = start.replace(year=start.year - 1)
            if end > start:
                spans.append((r.start(), r.end(), start, end))
    if not spans:
        for m, (start, end) in _atoms(query, ref):
            spans.append((m.start(), m.end(), start, end))
    if not spans:
        return None
    start = min(s[2] for s in spans)
    end = max(s[3] for s in spans)
    expression = " … ".join(query[a:b].strip() for a, b, _, _ in spans)
    return QueryTimeRange(start.replace(tzinfo=UTC), end.replace(tzinfo=UTC), expression)


def strip_time_expression(query: str, time_range: QueryTimeRange) -> str:
    """The query without the words that stated its time constraint ("What did Alice do")."""
    out = query
    for part in time_range.expression.split(" … "):
        out = out.replace(part, " ", 1)
    return re.sub(r"\s+([?.!,])", r"\1", re.sub(r"\s{2,}", " ", out)).strip() or query
