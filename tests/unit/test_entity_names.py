"""Display names and re-cleaned forms of stored entities (memora.entities.names)."""

from __future__ import annotations

from memora.entities.names import aliases, clean_counts, display_name, merged_counts


def test_display_name_is_the_most_frequent_form_then_the_longer() -> None:
    assert display_name({"Mel": 5, "Melanie": 3}) == "Mel"
    assert display_name({"Melanie": 2, "Melanie Brooks": 2}) == "Melanie Brooks"
    assert display_name({"ALICE": 1, "Alice": 1}) == "ALICE"  # then code point order, as SQL's


def test_clean_counts_cleans_forms_drops_noise_and_sums() -> None:
    raw = {"Bye Caroline": 3, "Caroline": 2, "ya, Caroline!": 1, "Hmm": 4, "Tues": 1}
    assert clean_counts(raw) == {"Caroline": 6}
    assert clean_counts({"Hmm": 4}) == {}
    assert merged_counts({"A B": 1}, {"A B": 2, "C": 1}) == {"A B": 3, "C": 1}
    assert aliases({"Caroline": 6, "Caro": 1, "The Caroline": 1}, "caroline") == ["caro"]
