"""Conversation search's score calibrated per embedding model (memora.retrieval.calibration):
0.5 is the model's equal-error line on the labelled pairs, the seed's score is the special case
of a line at cosine 0.5, the table agrees with a fit of the bundled model, and a model outside
the table is fitted once."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pytest

from memora.basics.config import DEFAULT_EMBEDDING_MODEL, Settings
from memora.nlp.embedding import Embedder, get_embedder
from memora.retrieval import calibration
from memora.retrieval.calibration import (
    KNOWN,
    SEED,
    Calibration,
    calibration_for,
    equal_error_cosine,
    fit,
    pairs,
)
from memora.retrieval.conversation import fused_score, vector_score

COSINES = np.linspace(-1.0, 1.0, 81)


def test_the_seed_calibration_is_the_seed_score() -> None:
    for c in COSINES:
        assert SEED.score(c) == pytest.approx(1 / (1 + math.sqrt(2 - 2 * c)))
        assert vector_score(c) == SEED.score(c)  # the default everywhere but the search
    assert SEED.score(0.5) == pytest.approx(0.5) and SEED.unit == pytest.approx(1.0)


@pytest.mark.parametrize("line", [0.1, 0.2551, 0.5, 0.7])
def test_a_calibrated_score_is_half_at_the_line_monotone_and_within_0_1(line: float) -> None:
    cal = Calibration("m", line, "table")
    scores = [cal.score(c) for c in COSINES]
    assert cal.score(line) == pytest.approx(0.5)
    assert cal.score(1.0) == 1.0 and all(0 < s <= 1 for s in scores)
    assert scores == sorted(scores)  # the vector ranking is the cosine's
    assert (cal.score(line + 0.01) > 0.5) and (cal.score(line - 0.01) < 0.5)
    # a keyword match still lifts towards 1 and never past it
    assert fused_score(line, 0.0, 0.5, cal) == pytest.approx(0.5)
    assert 0.5 < fused_score(line, 0.9, 0.5, cal) < 1.0


def test_the_calibration_moves_the_line_not_the_ranking() -> None:
    """The fused score (vector and keyword) is rescaled as a whole, so any calibration ranks
    candidates as the seed's score does; only where 0.5 falls differs."""
    rng = np.random.default_rng(3)
    candidates = list(zip(rng.uniform(-0.2, 0.9, 300), rng.uniform(0, 0.99, 300), strict=True))
    cal = Calibration("m", 0.2551, "table")

    def order(c: Calibration) -> list[int]:
        scores = [fused_score(cos, k, 0.5, c) for cos, k in candidates]
        return sorted(range(len(candidates)), key=lambda i: -scores[i])

    assert order(cal) == order(SEED)
    seed_line = 1 / (1 + cal.unit)  # 0.5 calibrated is this on the seed's scale (≈ 0.45)
    for cos, k in candidates:
        fused = fused_score(cos, k, 0.5, cal)
        assert cal.score(cos) <= fused <= 1.0  # a keyword match only lifts
        assert (fused >= 0.5) == (fused_score(cos, k, 0.5, SEED) >= seed_line)


def test_the_equal_error_line_balances_both_errors() -> None:
    # apart: the line lies in the gap, no error on either side
    assert 0.3 < equal_error_cosine(np.array([0.5, 0.6, 0.7]), np.array([0.1, 0.2, 0.3])) < 0.5
    # overlapping: at best one pair of five is misjudged on either side; of the lines that
    # do as well (0.325, 0.375), the one with fewer errors in all: only 0.25 is dropped
    related = np.array([0.25, 0.4, 0.5, 0.6, 0.7])
    unrelated = np.array([0.0, 0.1, 0.2, 0.3, 0.35])
    line = equal_error_cosine(related, unrelated)
    assert line == pytest.approx(0.375)
    assert (np.mean(related < line), np.mean(unrelated >= line)) == (0.2, 0.0)
    rng = np.random.default_rng(7)
    related, unrelated = rng.normal(0.45, 0.1, 400), rng.normal(0.15, 0.1, 400)
    line = equal_error_cosine(related, unrelated)
    assert abs(np.mean(related < line) - np.mean(unrelated >= line)) <= 0.01
    assert line == pytest.approx(0.30, abs=0.02)


def test_the_pair_set_is_broad_and_leaves_the_issue_example_out() -> None:
    items = pairs()
    assert len(items) >= 120 and len({p.domain for p in items}) >= 20
    assert len({p.query for p in items}) == len(items)
    text = " ".join(f"{p.query} {p.related} {p.unrelated}" for p in items).lower()
    assert "japan" not in text and "kyoto" not in text  # the issue's example is a test only


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder(DEFAULT_EMBEDDING_MODEL)


def test_the_table_is_what_a_fit_of_the_bundled_model_gives(minilm: Embedder) -> None:
    result = fit(minilm)
    assert KNOWN[DEFAULT_EMBEDDING_MODEL] == pytest.approx(result.cosine, abs=0.005)
    at_line, at_seed = result.rates(result.cosine), result.rates(0.5)
    # the figures docs/conversations.md gives: the seed's line drops most related messages,
    # the fitted one drops as many related as it keeps unrelated, about one in sixteen
    assert at_seed["related_dropped"] > 0.6
    assert at_line["related_dropped"] < 0.1 and at_line["unrelated_kept"] < 0.1
    assert at_line["other_domain_kept"] < 0.03
    assert calibration_for(minilm).source == "table"


def test_the_issue_example_scores_over_the_default_only_calibrated(minilm: Embedder) -> None:
    query, message = minilm.embed(
        ["trip to Japan", "I am planning a trip to Kyoto in April to see the cherry blossoms."]
    )
    cosine = float(query @ message)
    assert SEED.score(cosine) < Settings().conversation_min_score  # the issue: about 0.47
    assert calibration_for(minilm).score(cosine) > Settings().conversation_min_score


class Stub:
    """An embedding "model" outside the table: one-hot vectors by domain word overlap, so its
    similarities are its own and a fit has something to find."""

    model_name = "stub-model-outside-the-table"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), 64))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, hash(w.strip(".,!?'")) % 64] += 1.0
            out[i, i % 64] += 0.5
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_a_model_outside_the_table_is_fitted_once_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(calibration, "_fitted", {})
    stub = Stub()
    with caplog.at_level(logging.INFO, logger="memora.retrieval.calibration"):
        first = calibration_for(stub)
        again = calibration_for(stub)
    assert first is again and stub.calls == 1 and first.source == "fitted"
    assert first.cosine == pytest.approx(fit(Stub()).cosine)
    assert "stub-model-outside-the-table" in caplog.text and "0.5 = cosine" in caplog.text
    assert calibration_for(stub, "off") is SEED  # the seed's score as it is, not calibrated
