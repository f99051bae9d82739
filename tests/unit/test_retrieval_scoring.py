"""The read path's scoring over plain data: RRF, heuristic signals, MMR, budget, spreading
activation, temporal closeness (seed 000 §3)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memora.retrieval.activation import Edge, Neighbours, SpreadSettings, spread_activation
from memora.retrieval.filters import NO_FILTER
from memora.retrieval.fusion import Recheck, rrf
from memora.retrieval.rerank.heuristic import (
    HeuristicWeights,
    feedback_similarity,
    frequency_boost,
    heuristic_scores,
    neighbour_keyword,
    recency_boost,
)
from memora.retrieval.scoring import fitting, minmax, mmr, temporal_closeness, within_budget

A, B, C, D, E = (uuid.UUID(int=i) for i in range(1, 6))


def test_rrf_matches_the_seed_example() -> None:
    # seed 000 §3.2: A rank 1 semantic, 5 keyword; B rank 3, 2, and 10 in graph
    semantic = [A, C, B]
    keyword = [D, B, E, uuid.uuid4(), A]
    graph = [uuid.uuid4() for _ in range(9)] + [B]
    scores = rrf({"semantic": semantic, "keyword": keyword, "graph": graph})
    assert scores[A] == pytest.approx(1 / 61 + 1 / 65)
    assert scores[B] == pytest.approx(1 / 63 + 1 / 62 + 1 / 70)
    assert scores[B] > scores[A]


def test_rrf_weights_scale_a_list_and_zero_drops_it() -> None:
    scores = rrf({"semantic": [A], "graph": [B]}, weights={"graph": 0.5})
    assert scores[B] == pytest.approx(0.5 / 61)
    assert B not in rrf({"semantic": [A], "graph": [B]}, weights={"graph": 0})


def test_a_recheck_takes_the_rows_written_since_by_their_wrapping_xids() -> None:
    """A row's xmin is a 32-bit xid, the failing units' horizon a 64-bit one: a row written at
    or after the horizon is checked again, across the 32-bit wrap and epochs too."""
    epoch = 3 << 32
    recheck = Recheck(NO_FILTER, since=epoch + 1000)
    assert recheck.written_since(1000) and recheck.written_since(1001)
    assert not recheck.written_since(999) and not recheck.written_since(2)  # older; frozen
    near_wrap = Recheck(NO_FILTER, since=epoch + 0xFFFFFFF0)
    assert near_wrap.written_since(0xFFFFFFF5) and near_wrap.written_since(5)  # after the wrap
    assert not near_wrap.written_since(0xFFFFFF00)


def test_minmax_handles_constant_and_empty_input() -> None:
    assert list(minmax(np.array([2.0, 4.0, 3.0]))) == [0.0, 1.0, 0.5]
    assert list(minmax(np.array([3.0, 3.0]))) == [1.0, 1.0]
    assert list(minmax(np.array([0.0, 0.0]))) == [0.0, 0.0]
    assert minmax(np.array([])).size == 0


def test_recency_decays_on_a_log_scale_and_the_seed_formula_is_its_complement() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert recency_boost(now, now) == 1.0
    assert recency_boost(now + timedelta(days=3), now) == 1.0  # future: brand new
    month = recency_boost(now - timedelta(days=30), now)
    year = recency_boost(now - timedelta(days=365), now)
    assert 1.0 > month > year == pytest.approx(0.0)
    assert recency_boost(now - timedelta(days=900), now) == 0.0
    seed = recency_boost(now - timedelta(days=30), now, "seed")
    assert seed == pytest.approx(np.log1p(30) / np.log1p(365))
    assert seed + month == pytest.approx(1.0)


def test_frequency_boost_saturates_at_100_accesses() -> None:
    assert frequency_boost(0) == 0.0
    assert frequency_boost(50) == 0.5
    assert frequency_boost(1000) == 1.0


def test_heuristic_is_the_seed_formula_over_normalised_signals() -> None:
    semantic = np.array([0.9, 0.5, -0.1])
    keyword = np.array([0.0, 10.0, 5.0])
    recency = np.array([1.0, 0.0, 0.0])
    frequency = np.array([0.0, 0.0, 1.0])
    context = np.array([0.2, 0.8, 0.0])
    signals = (semantic, keyword, recency, frequency, context)
    seed = heuristic_scores(*signals, HeuristicWeights())
    expected = [0.6 * 0.9 + 0.4 * 0 + 0.2, 0.6 * 0.5 + 0.4 * 1, 0.6 * 0 + 0.4 * 0.5 + 0.1]
    assert list(seed) == pytest.approx(expected)
    extended = heuristic_scores(*signals, HeuristicWeights(context=0.5))
    assert list(extended - seed) == pytest.approx([0.1, 0.4, 0.0])


def test_answer_type_adds_its_weight_to_the_candidates_that_hold_one() -> None:
    # "Where does Maya work?": a turn saying "working" holds the question's one content word
    # (the best BM25), the one naming Northwind (an organisation) only the name
    semantic, keyword = np.array([0.26, 0.15]), np.array([2.3, 0.4])
    zeros = np.zeros(2)
    signals = (semantic, keyword, zeros, zeros, zeros)
    plain = heuristic_scores(*signals, HeuristicWeights(answer_type=0.2))
    typed = heuristic_scores(
        *signals, HeuristicWeights(answer_type=0.2), answer_type=np.array([0.0, 1.0])
    )
    assert list(typed - plain) == pytest.approx([0.0, 0.2])
    # weight 0 (the seed's formula) leaves the scores as they were
    seed = heuristic_scores(*signals, HeuristicWeights(), answer_type=np.array([0.0, 1.0]))
    assert list(seed) == pytest.approx(list(plain))


def test_the_speaker_signal_lifts_what_the_named_person_said() -> None:
    # "Does Dana have any allergies?": the assistant's "I'll remember the allergy" holds the
    # question's word (the best BM25), Dana's "I'm allergic to ibuprofen" was said by her
    semantic, keyword = np.array([0.35, 0.30]), np.array([1.8, 1.2])
    zeros = np.zeros(2)
    signals = (semantic, keyword, zeros, zeros, zeros)
    said = np.array([0.0, 1.0])
    plain = heuristic_scores(*signals, HeuristicWeights(speaker=0.2))
    lifted = heuristic_scores(*signals, HeuristicWeights(speaker=0.2), speaker=said)
    assert list(lifted - plain) == pytest.approx([0.0, 0.2])
    assert lifted[1] > lifted[0]
    seed = heuristic_scores(*signals, HeuristicWeights(), speaker=said)  # weight 0: the seed's
    assert list(seed) == pytest.approx(list(plain))


def test_neighbour_keyword_is_the_best_match_next_to_a_candidate() -> None:
    chat, other = uuid.uuid4(), uuid.uuid4()
    places = [
        (chat, 4, 0),  # Maya: "I'm allergic to bee stings" (no query word)
        (chat, 5, 0),  # assistant: "I'll remember the allergy" (the best match)
        (chat, 5, 1),  # the same reply's second unit
        (chat, 7, 0),  # two turns later: not next to either
        (other, 6, 0),  # another conversation's turn 6: not next to turn 5 of this one
        None,  # a memory stated outside any conversation
    ]
    keyword = np.array([0.0, 1.0, 0.25, 0.5, 0.8, 0.9])
    near = neighbour_keyword(places, keyword)
    assert list(near) == pytest.approx([1.0, 0.25, 1.0, 0.0, 0.0, 0.0])
    # weighed like the other signals; the default weight 0 is the seed's formula
    zeros = np.zeros(6)
    signals = (zeros, keyword, zeros, zeros, zeros)
    plain = heuristic_scores(*signals, HeuristicWeights(context_keyword=0.2))
    lifted = heuristic_scores(*signals, HeuristicWeights(context_keyword=0.2), near_keyword=near)
    assert list(lifted - plain) == pytest.approx(list(0.2 * near))
    seed = heuristic_scores(*signals, HeuristicWeights(), near_keyword=near)
    assert list(seed) == pytest.approx(list(plain))


def test_no_keyword_match_anywhere_scores_zero_not_nan() -> None:
    zeros = np.zeros(2)
    scores = heuristic_scores(np.array([0.4, 0.2]), zeros, zeros, zeros, zeros, HeuristicWeights())
    assert list(scores) == pytest.approx([0.24, 0.12])


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_mmr_skips_a_near_duplicate_for_a_different_relevant_result() -> None:
    embeddings = np.array([_unit(1, 0, 0), _unit(1, 0.01, 0), _unit(0, 1, 0)])
    relevance = np.array([1.0, 0.95, 0.8])
    assert mmr(relevance, embeddings, 3, lam=0.5) == [0, 2, 1]
    assert mmr(relevance, embeddings, 3, lam=1.0) == [0, 1, 2]
    assert mmr(relevance, embeddings, 10, lam=0.5)[:1] == [0]
    assert mmr(np.array([]), np.zeros((0, 3)), 5) == []


def test_feedback_is_the_similarity_to_the_centroid_of_the_first_pass_best() -> None:
    # two top units about one topic (x, y), a low-scored unit between them, one elsewhere (z)
    embeddings = np.array([_unit(1, 0, 0), _unit(0, 1, 0), _unit(1, 1, 0), _unit(0, 0, 1)])
    scores = np.array([0.9, 0.8, 0.1, 0.5])
    feedback = feedback_similarity(embeddings, scores, top=2)
    # the centroid of units 0 and 1 is (1, 1, 0)/√2: unit 2 lies on it, unit 3 is orthogonal
    assert list(feedback) == pytest.approx([1 / np.sqrt(2), 1 / np.sqrt(2), 1.0, 0.0])
    assert list(feedback_similarity(embeddings, scores, top=1)) == pytest.approx(
        [1.0, 0.0, 1 / np.sqrt(2), 0.0]
    )
    assert list(feedback_similarity(embeddings, scores, top=0)) == [0.0] * 4
    assert feedback_similarity(np.zeros((0, 3)), np.array([]), top=5).size == 0


def test_token_budget_keeps_a_prefix_of_the_ranking() -> None:
    assert within_budget([10, 20, 30], 60) == 3
    assert within_budget([10, 20, 30], 59) == 2
    assert within_budget([100, 1, 1], 50) == 0
    assert within_budget([], 10) == 0


def test_texts_whose_bytes_fit_the_budget_are_not_tokenized() -> None:
    counted: list[list[str]] = []

    def count(texts: Sequence[str]) -> list[int]:
        counted.append(list(texts))
        return [len(t.split()) for t in texts]

    texts = ["one two three", "four five"]  # 14 and 10 bytes, each bound one more
    assert fitting(texts, 25, count) == 2
    assert counted == []
    assert fitting(texts, 5, count) == 2  # the bound does not fit: counted, 3 + 2 tokens
    assert fitting(texts, 4, count) == 1
    assert counted == [texts, texts]
    assert fitting([], 0, count) == 0


def test_no_text_has_more_tokens_than_its_bytes_and_one() -> None:
    """The bound `fitting` relies on, for the bundled tokenizer (every count of the budget
    but a local model's own) on texts made to break it: short words, digits, punctuation,
    accents, scripts of three bytes a character, emoji, a lone letter."""
    from memora.nlp.remote_embedding import _bundled_tokenizer

    texts = [
        "a", "I", "x y z", "1 2 3 4 5", "?!.,;:", "é", "naïve café", "東京で会いましょう",
        "Привет, как дела?", "🙂🙂🙂", "ok 👍 see u @ 5pm!!", "a-b-c-d-e", "\t\n", "",
        "supercalifragilisticexpialidocious", "https://example.com/a?b=c&d=e",
    ]  # fmt: skip
    ids = _bundled_tokenizer()(texts, add_special_tokens=False)["input_ids"]
    for text, tokens in zip(texts, ids, strict=True):
        assert len(tokens) <= len(text.encode()) + 1, text


def test_temporal_closeness_is_one_at_the_centre_and_half_at_the_edges() -> None:
    start = datetime(2024, 6, 1, tzinfo=UTC)
    end = datetime(2024, 7, 1, tzinfo=UTC)
    assert temporal_closeness(start + (end - start) / 2, start, end) == pytest.approx(1.0)
    assert temporal_closeness(start, start, end) == pytest.approx(0.5)
    assert temporal_closeness(end + (end - start), start, end) == 0.0


def _graph(
    edges: dict[uuid.UUID, list[Edge[uuid.UUID]]],
) -> tuple[list[list[uuid.UUID]], Neighbours[uuid.UUID]]:
    calls: list[list[uuid.UUID]] = []

    def neighbours(ids: list[uuid.UUID]) -> dict[uuid.UUID, list[Edge[uuid.UUID]]]:
        calls.append(list(ids))
        return {i: edges.get(i, []) for i in ids}

    return calls, neighbours


def test_spreading_activation_decays_per_hop_and_ranks_by_activation() -> None:
    edges = {
        A: [(B, "entity", 1.0), (C, "temporal", 0.5)],
        B: [(D, "semantic", 0.9)],
        D: [(E, "entity", 1.0)],
    }
    _, neighbours = _graph(edges)
    found = dict(spread_activation({A: 1.0}, neighbours, 10, SpreadSettings()))
    assert found[A] == 1.0
    assert found[B] == pytest.approx(0.8)
    assert found[C] == pytest.approx(0.4)
    assert found[D] == pytest.approx(0.8 * 0.9 * 0.8)
    assert found[E] == pytest.approx(0.8 * 0.9 * 0.8 * 0.8)
    ranked = spread_activation({A: 1.0}, neighbours, 10, SpreadSettings())
    assert [n for n, _ in ranked] == [A, B, D, E, C]


def test_spreading_activation_explores_at_most_the_budget_in_waves() -> None:
    hub = {A: [(uuid.UUID(int=100 + i), "entity", 1.0) for i in range(30)]}
    calls, neighbours = _graph(hub)
    found = spread_activation({A: 1.0}, neighbours, 5, SpreadSettings(wave=3))
    assert len(found) == 5
    assert [len(c) for c in calls] == [1, 3, 1]  # one round trip per wave, never past budget


def test_causal_links_are_boosted_but_never_exceed_their_source() -> None:
    edges = {A: [(B, "causes", 1.0), (C, "temporal", 1.0)], B: [(D, "caused_by", 0.3)]}
    _, neighbours = _graph(edges)
    found = dict(spread_activation({A: 0.9}, neighbours, 10, SpreadSettings()))
    assert found[B] == pytest.approx(0.9)  # 0.9 · 1.0 · 2 · 0.8 = 1.44, capped at the source
    assert found[C] == pytest.approx(0.72)
    assert found[D] == pytest.approx(0.9 * 0.3 * 2 * 0.8)


def test_weak_activation_stops_the_spread() -> None:
    edges = {A: [(B, "temporal", 0.05)], B: [(C, "entity", 1.0)]}
    _, neighbours = _graph(edges)
    found = dict(spread_activation({A: 1.0}, neighbours, 10, SpreadSettings()))
    assert B not in found and C not in found  # 0.04 < min_activation


@pytest.mark.parametrize("share", [0.1, 0.5, 0.999])
def test_admitting_at_exploration_walks_the_filtered_graph(share: float) -> None:
    """A filter checked as nodes come up for exploration (`admit`) explores what the walk
    over the filtered graph explores (each source's strongest `fanout` links to passing
    nodes, among the links given), with the same activations, checking each node once and,
    for a broad filter, far fewer nodes than the targets that walk would check."""
    rng = np.random.default_rng(7)
    nodes = [uuid.UUID(int=i) for i in range(1, 2001)]
    passes = {n for n in nodes if rng.random() < share} | {nodes[0]}
    graph: dict[uuid.UUID, list[Edge[uuid.UUID]]] = {
        n: sorted(
            ((nodes[int(j)], "entity", float(rng.random()))
             for j in rng.choice(len(nodes), 40, replace=False)),
            key=lambda e: -e[2],
        )
        for n in nodes
    }  # fmt: skip
    fanout, budget = 5, 60
    filtered = {n: [e for e in edges if e[0] in passes][:fanout] for n, edges in graph.items()}
    _, eager_neighbours = _graph(filtered)
    eager = spread_activation({nodes[0]: 1.0}, eager_neighbours, budget, SpreadSettings())
    checked: list[uuid.UUID] = []

    def admit(ids: list[uuid.UUID]) -> set[uuid.UUID]:
        checked.extend(ids)
        return {i for i in ids if i in passes}

    _, neighbours = _graph(graph)
    lazy = spread_activation(
        {nodes[0]: 1.0}, neighbours, budget, SpreadSettings(), admit=admit, fanout=fanout
    )
    assert len(eager) >= 10
    assert dict(lazy) == pytest.approx(dict(eager))
    assert len(checked) == len(set(checked))  # each node checked once
    targets = {e[0] for n, _ in eager for e in graph[n]}  # what checking every link would ask
    if share > 0.9:
        assert len(checked) < len(targets) / 2


def test_keyword_reads_the_rarest_terms_within_its_budget() -> None:
    from memora.retrieval.types import TermStats

    stats = TermStats(1000, 10.0, {}, {"lidar": 3, "work": 400, "alice": 90, "zzz": 0})
    # a term no unit held when counted stays: units written since may hold it
    assert stats.matching_terms(100) == ["zzz", "lidar", "alice"]
    assert stats.matching_terms(1000) == ["zzz", "lidar", "alice", "work"]
    assert stats.matching_terms(1) == ["zzz", "lidar"]  # the rarest held, whatever the budget
    assert TermStats(10, 1.0, {}, {"zzz": 0}).matching_terms(5) == ["zzz"]


def test_the_unfiltered_walk_equals_the_checked_walk_when_everything_passes() -> None:
    """Unfiltered searches take their own loop (every link followed, nothing to check): it
    explores the same nodes with the same activations, in the same order, as the checked
    walk when every node passes, over mixed link types (boosted, capped at the source)."""
    rng = np.random.default_rng(11)
    nodes = [uuid.UUID(int=i) for i in range(1, 1001)]
    types = ["entity", "semantic", "temporal", "causes", "explicit", "unknown-type"]
    graph: dict[uuid.UUID, list[Edge[uuid.UUID]]] = {
        n: sorted(
            ((nodes[int(j)], types[int(rng.integers(len(types)))], float(rng.random()))
             for j in rng.choice(len(nodes), 12, replace=False)),
            key=lambda e: -e[2],
        )
        for n in nodes
    }  # fmt: skip
    _, neighbours = _graph(graph)
    entry = {nodes[0]: 1.0, nodes[1]: 0.7}
    walked = spread_activation(entry, neighbours, 80, SpreadSettings())
    checked = spread_activation(
        entry, neighbours, 80, SpreadSettings(), admit=lambda ids: set(ids), fanout=12
    )
    assert len(walked) == 80
    assert walked == checked


def test_a_turn_that_asks_or_only_exclaims_states_nothing() -> None:
    from memora.retrieval.statements import statement_share

    asks = "Melanie: Wow, Caroline! What kinda jobs are you thinking of? Anything that stands out?"
    assert statement_share(asks, "Melanie") == 0.0
    says = "Melanie: Wow! I just signed up for a pottery class yesterday."
    assert statement_share(says, "Melanie") == pytest.approx(9 / 10)  # "Wow!" exclaims
    # a longer exclamation states; the speaker's "Name:" is not one of the words
    assert statement_share("Ines: We finally booked the trip to Porto!", "Ines") == 1.0
    assert statement_share("Ines: so", "Ines") == 1.0
    assert statement_share("", None) == 0.0
    assert statement_share("?!", None) == 0.0


def test_the_statement_signal_lifts_what_states_above_what_asks() -> None:
    semantic, keyword = np.array([0.5, 0.5]), np.array([1.0, 1.0])
    zero = np.zeros(2)
    weights = HeuristicWeights(statement=0.3)
    scores = heuristic_scores(
        semantic, keyword, zero, zero, zero, weights, statement=np.array([1.0, 0.0])
    )
    assert scores[0] - scores[1] == pytest.approx(0.3)
    assert np.array_equal(
        heuristic_scores(semantic, keyword, zero, zero, zero, HeuristicWeights()),
        heuristic_scores(
            semantic, keyword, zero, zero, zero, HeuristicWeights(), statement=np.ones(2)
        ),
    )  # weight 0: the seed's formula


def test_an_inference_questions_hedges_are_not_keywords() -> None:
    from memora.retrieval.question import without_hedges

    assert without_hedges("Would Ines likely enjoy a pottery retreat?").split() == [
        "Ines", "enjoy", "a", "pottery", "retreat?"
    ]  # fmt: skip
    assert without_hedges("What might Priya do, probably?").split() == ["What", "Priya", "do,", "?"]
    assert without_hedges("When did Ines go camping in May?") == "When did Ines go camping in May?"
    assert without_hedges("Ines mayor likelihood") == "Ines mayor likelihood"  # whole words only
