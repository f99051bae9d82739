"""The benchmark runners' metrics against values computed by hand, and their readers."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memora.basics.config import Settings
from services.cli.bench import judge, locomo, longmemeval
from services.cli.bench import metrics as m

DATA = Path(__file__).parents[1] / "data" / "bench"


def test_locomo_recall_and_reciprocal_rank() -> None:
    ranked = ["a", "b", "c", "d"]
    assert m.recall_at_k(ranked, {"b", "d", "x"}, 2) == pytest.approx(1 / 3)
    assert m.recall_at_k(ranked, {"b", "d", "x"}, 4) == pytest.approx(2 / 3)
    assert m.reciprocal_rank(ranked, {"c", "d"}) == pytest.approx(1 / 3)
    assert m.reciprocal_rank(ranked, {"x"}) == 0.0
    figures = m.locomo_retrieval(ranked, {"a"})
    assert figures == {"recall@5": 1.0, "recall@10": 1.0, "recall@20": 1.0, "recall@50": 1.0,
                       "mrr": 1.0}  # fmt: skip


def test_dcg_leaves_the_first_two_ranks_undiscounted() -> None:
    # LongMemEval's dcg: rel1 + sum_{i>=2} rel_i / log2(i)
    assert m.dcg([1, 0, 1], 3) == pytest.approx(1 + 1 / math.log2(3))
    assert m.dcg([0, 1], 2) == pytest.approx(1.0)
    assert m.dcg([], 5) == 0.0


def test_ndcg_recall_any_and_all() -> None:
    corpus = ["x", "y", "g1", "g2", "z"]
    ranked, gold = ["x", "g1", "y", "g2"], {"g1", "g2"}
    # actual [0,1,0] -> 1; ideal [1,1,0] -> 2
    assert m.ndcg_any(ranked, gold, corpus, 3) == pytest.approx(0.5)
    # actual [0,1,0,1] -> 1 + 1/2; ideal [1,1,0,0] -> 2
    assert m.ndcg_any(ranked, gold, corpus, 4) == pytest.approx(0.75)
    assert m.ndcg_any(ranked, set(), corpus, 4) == 0.0
    assert (m.recall_any(ranked, gold, 1), m.recall_any(ranked, gold, 2)) == (0.0, 1.0)
    assert (m.recall_all(ranked, gold, 2), m.recall_all(ranked, gold, 4)) == (0.0, 1.0)


def test_turn_to_session_widens_k_to_distinct_sessions() -> None:
    corpus = ["s1_1", "s1_2", "s2_1", "s2_2", "s3_1"]
    ranked = ["s1_1", "s1_2", "s2_2", "s3_1"]
    # k=2: the top 2 turns hold one session, so k grows to 3 (s1, s1, s2)
    r_any, r_all, ndcg = m.turn_to_session(ranked, {"s2_2"}, corpus, 2)
    assert (r_any, r_all) == (1.0, 1.0)
    # relevances per turn: [0,0,1] -> 1/log2(3); ideal over the turns' sessions [1,1,0] -> 2
    assert ndcg == pytest.approx((1 / math.log2(3)) / 2)
    assert m.turn_to_session(ranked, {"s2_2"}, corpus, 1)[0] == 0.0
    assert m.session_of("answer_sess_b_12") == "answer_sess_b"


def test_longmemeval_figures_have_both_levels() -> None:
    figures = m.longmemeval_retrieval(["a_1", "b_1"], {"b_1"}, ["a_1", "a_2", "b_1"])
    assert figures["turn/recall_any@1"] == 0.0 and figures["turn/recall_any@3"] == 1.0
    assert figures["session/recall_any@1"] == 0.0 and figures["session/recall_all@3"] == 1.0
    assert len(figures) == 2 * 3 * len(m.LONGMEMEVAL_KS)


def test_token_f1_and_means() -> None:
    assert m.token_f1("The greyhound, Biscuit!", "biscuit") == pytest.approx(2 / 3)
    assert m.token_f1("Biscuit", "biscuit.") == 1.0
    assert m.token_f1("a cat", "the dog") == 0.0
    assert m.token_f1("", "") == 1.0 and m.token_f1("x", "") == 0.0
    rows = [{"a": 1.0, "b": None}, {"a": 0.0, "b": 0.5}]
    assert m.mean_metrics(rows) == {"a": 0.5, "b": 0.5}


def test_locomo_reader() -> None:
    data = locomo.load(DATA / "locomo_tiny.json", "p-", None, None)
    assert list(data.sessions) == ["p-tiny-1"]
    sessions = data.sessions["p-tiny-1"]
    assert [s.document_id for s in sessions] == ["tiny-1:session_1", "tiny-1:session_2"]
    assert sessions[1].items[3]["metadata"] == {"dia_id": "D2:4"}
    assert "[shares image: a greyhound lying on a blue rug]" in sessions[1].items[3]["content"]
    assert [q.category for q in data.questions] == [
        "single-hop",
        "temporal",
        "multi-hop",
        "open-domain",
    ]  # fmt: skip  (category 5, adversarial, is left out)
    assert data.questions[3].evidence == {"D1:3"}  # 'D:1:3' normalised
    assert data.questions[0].reference_time == datetime(2024, 3, 18, 18, 40, tzinfo=UTC)
    assert len(locomo.load(DATA / "locomo_tiny.json", "p-", 1, 2).questions) == 2


def test_longmemeval_reader() -> None:
    data = longmemeval.load(DATA / "longmemeval_tiny.json", "l-", None)
    assert list(data.sessions) == ["l-tiny_q1", "l-tiny_q2", "l-tiny_q3_abs"]
    first = data.sessions["l-tiny_q1"][1]
    assert first.document_id == "answer_sess_b"
    assert first.items[0]["metadata"] == {
        "turn_id": "answer_sess_b_1",
        "session_id": "answer_sess_b",
    }
    assert first.items[0]["event_date"] == "2024-03-04T18:30:00+00:00"
    assert first.items[1]["role"] == "assistant"
    q1, q2, q3 = data.questions
    assert q1.evidence == {"answer_sess_b_1"} and len(q1.corpus) == 7
    assert q2.evidence == {"answer_s1_1", "answer_s3_1"}
    assert q1.reference_time == datetime(2024, 3, 20, 10, 0, tzinfo=UTC)
    assert (q3.abstention, q3.category, q3.evidence) == (True, "abstention", set())
    assert len(longmemeval.load(DATA / "longmemeval_tiny.json", "l-", 1).questions) == 1


def test_readers_refuse_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match="LongMemEval"):
        longmemeval.load(bad, "l-", None)
    with pytest.raises(ValueError, match="LoCoMo"):
        locomo.load(bad, "p-", None, None)


def test_judge_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PROVIDER", "API_KEY", "MODEL", "BASE_URL"):
        monkeypatch.delenv(f"MEMORA_JUDGE_LLM_{name}", raising=False)
        monkeypatch.delenv(f"JUDGE_LLM_{name}", raising=False)
    assert judge.judge_settings(Settings(llm_base_url=None, llm_api_key=None)) is None
    main = judge.judge_settings(Settings(llm_base_url="http://main/v1", llm_model="main-model"))
    assert main is not None  # falls back to the main LLM
    assert (main.llm_base_url, main.llm_model) == ("http://main/v1", "main-model")
    monkeypatch.setenv("MEMORA_JUDGE_LLM_PROVIDER", "groq")
    monkeypatch.setenv("JUDGE_LLM_API_KEY", "gsk-test")
    monkeypatch.setenv("MEMORA_JUDGE_LLM_MODEL", "judge-model")
    chosen = judge.judge_settings(Settings(llm_base_url=None, llm_api_key=None))
    assert chosen is not None
    assert (chosen.llm_base_url, chosen.llm_api_key, chosen.llm_model) == (
        "https://api.groq.com/openai/v1", "gsk-test", "judge-model"
    )  # fmt: skip
    monkeypatch.setenv("MEMORA_JUDGE_LLM_PROVIDER", "nonsense")
    with pytest.raises(ValueError, match=r"(?i)judge_llm_provider"):
        Settings()


def test_judge_prompt_names_the_category_rule() -> None:
    text = judge.prompt("abstention", "Q?", "unknown", "I don't know")[1]["content"]
    assert judge.MARKER in text and "does not know" in text
    assert "Expected answer: unknown" in text and "Response: I don't know" in text
