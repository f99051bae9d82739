"""The read path's validity windows (memora.retrieval.validity): which window a search gets,
and the status condition hydration applies with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memora.nlp.temporal import QueryTimeRange
from memora.retrieval.filters import scope_where
from memora.retrieval.validity import INSTANT, status_where, window_of

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)
YEAR_2023 = QueryTimeRange(
    datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC), "in 2023"
)


def test_no_as_of_and_no_period_means_no_window() -> None:
    assert window_of(None, None, NOW) is None


def test_as_of_is_an_instant_and_wins_over_the_query_period() -> None:
    at = datetime(2024, 6, 1, tzinfo=UTC)
    window = window_of(at, YEAR_2023, NOW)
    assert window is not None and window.strict
    assert (window.start, window.end, window.source) == (at, at + INSTANT, "as_of")


def test_a_past_period_is_a_loose_window_cut_at_the_reference_time() -> None:
    window = window_of(None, YEAR_2023, NOW)
    assert window is not None and not window.strict and window.source == "query"
    assert (window.start, window.end) == (YEAR_2023.start, YEAR_2023.end)
    this_year = QueryTimeRange(
        datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC), "this year"
    )
    cut = window_of(None, this_year, NOW)
    assert cut is not None and cut.end == NOW


def test_a_future_period_has_no_history() -> None:
    next_week = QueryTimeRange(NOW + timedelta(days=3), NOW + timedelta(days=10), "next week")
    assert window_of(None, next_week, NOW) is None


def test_the_default_hydration_condition_is_unchanged() -> None:
    """The default search's SQL text, hence its plan, is what it was before validity windows."""
    before = (
        "m.agent_id = %(agent)s AND m.fact_type = ANY(%(types)s)"
        " AND m.embedding IS NOT NULL AND m.status = 'active'"
    )
    assert scope_where("m") == before
    assert scope_where("m", status_where("m", None)) == before


def test_windows_admit_superseded_memories_and_as_of_checks_active_ones_too() -> None:
    loose = status_where("m", window_of(None, YEAR_2023, NOW))
    strict = status_where("m", window_of(NOW, None, NOW))
    for sql in (loose, strict):
        assert "m.status = 'superseded' AND m.valid_until IS NOT NULL" in sql
        assert "m.valid_from < %(w_end)s" in sql
    # the period narrows only superseded memories; as_of every memory
    assert loose.startswith("(m.status = 'active' OR (")
    assert strict.endswith("coalesce(m.valid_until, 'infinity') > %(w_start)s")
    assert "forgotten" not in strict and "archived" not in strict
