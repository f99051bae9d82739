"""The filter compiler: the public flat form, validation, and SQL with values only as parameters."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memora.retrieval.filters import NO_FILTER, Filters, compile_filters


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
