"""The filter compiler: the public flat form, validation, and SQL with values only as parameters;
how many of the unfiltered best a broad filter takes, and the units it is known to fail."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from memora.retrieval.filters import NO_FILTER, Filters, UnitSet, broad_count, compile_filters


def test_flat_form_splits_metadata_from_reserved_keys() -> None:
    f = Filters.model_validate(
        {
            "category": "identity",
            "turn": {"gte": 3},
            "tags": {"any": ["x"]},
            "time": {"end": "2024-05-01"},
        }
    )
    assert set(f.metadata) == {"category", "turn"}
    assert f.tags is not None and f.tags.any == ["x"]
    assert f.flat()["turn"] == {"gte": 3.0}


def test_no_filter_compiles_to_nothing() -> None:
    assert compile_filters(None, "m") == NO_FILTER
    assert compile_filters(Filters.model_validate({}), "m") == NO_FILTER


def test_keys_and_values_are_bound_never_inlined() -> None:
    evil = "x'); DROP TABLE memory_units; --"
    f = Filters.model_validate({"speaker": [evil, "Bob"], "about": evil, "turn": {"lt": 4}})
    where = compile_filters(f, "m")
    assert evil not in where.sql and "DROP" not in where.sql
    assert where.sql.startswith(" AND m.metadata @> %(f0)s")
    assert "memora_number(m.metadata, 'turn') < %(f3)s::float8" in where.sql


@pytest.mark.parametrize(
    "bad",
    [
        {"bad key!": 1},  # key pattern
        {"turn": {}},  # a range needs a bound
        {"turn": {"gte": "three"}},
        {"tags": {"some": ["x"]}},
        {"time": {"start": "2024-02-01", "end": "2024-01-01"}},
        {"speaker": []},
        {f"k{i}": i for i in range(17)},  # too many keys
        {"nested": {"a": {"b": 1}}},
    ],
)
def test_bad_filters_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Filters.model_validate(bad)


def test_alias_must_be_an_identifier() -> None:
    with pytest.raises(ValueError):
        compile_filters(Filters.model_validate({"a": 1}), "m; DROP")


def test_broad_count_takes_a_margin_for_the_share_or_the_known_failing_units() -> None:
    """Unknown failing units: a quarter more than the share needs. Known: as many more as are
    likely to fail at that share (three deviations over the expected count, and one), never
    more than fail in all."""
    assert broad_count(50, 0.8) == 79
    assert broad_count(50, 0.1) == 125  # below BROAD_SHARE: counted at it
    assert broad_count(50, 0.999, 100) == 52
    assert broad_count(50, 0.999, 0) == 50
    assert broad_count(50, 0.999, 1) == 51
    assert broad_count(50, 0.8, 20_000) == 75  # 12.5 expected: 12.5 + 10.6, and one
    assert broad_count(4, 0.5, 1_000) == 10  # the share's quarter more is the smaller


def test_a_unit_set_checks_rows_by_their_ids_integers() -> None:
    ids = [uuid.uuid4() for _ in range(6)]
    units = UnitSet.of(str(u) for u in ids[:3])
    rows = [(u, float(i)) for i, u in enumerate(ids)]
    assert units.outside(rows) == rows[3:]
    changed = units.changed(added=[str(ids[4])], removed=[str(ids[0])])
    assert changed.text == {str(u) for u in (ids[1], ids[2], ids[4])}
    assert changed.outside(rows) == [rows[0], rows[3], rows[5]]
    assert units.changed([], []) is units and len(changed) == 3
