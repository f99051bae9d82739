"""`memora bench locomo|longmemeval` against a real stack (write API and query service under
uvicorn, the suite's PostgreSQL, the pipeline inline): ingestion, retrieval figures, think
answers graded by the judge (both through the fake LLM server), --skip-ingestion, --out, and
the results files served to the web UI (GET /api/bench/results)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from memora.basics.config import Settings
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from memora.usecases.follow_up import FOLLOW_UP_MARKER
from services.cli.bench import judge
from services.cli.bench.metrics import token_f1
from services.cli.main import app
from tests.fakes import LLM_TEST_SETTINGS, FakeOpenAI, Recorded, Reply
from tests.integration.stack_support import topology

pytestmark = pytest.mark.integration
DATA = Path(__file__).parents[1] / "data" / "bench"
NO_LLM = {
    f"{prefix}{name}": ""
    for prefix in ("MEMORA_", "MEMORA_JUDGE_", "JUDGE_")
    for name in ("LLM_BASE_URL", "LLM_API_KEY")
}
JUDGE_ENV = {
    "MEMORA_JUDGE_LLM_BASE_URL": "",  # filled in by the fixture
    "MEMORA_JUDGE_LLM_API_KEY": "judge-key",
    "MEMORA_JUDGE_LLM_MODEL": "judge-model",
}
# think's answers, by a phrase of the question; the fake judge accepts the ones in CORRECT
ANSWERS = {
    "name of Maya's dog": "Her dog is called Biscuit.",
    "When did Maya adopt": "I don't remember.",
    "Which hobbies": "Tom repainted his kitchen and took a pottery course.",
    "quiet flat": "Probably not.",
    "breed is the dog": "You adopted a greyhound.",
    "two cities": "Lyon and Porto.",
    "name of my cat": "You never told me about a cat.",
}
CORRECT = {ANSWERS[k] for k in ("name of Maya's dog", "Which hobbies", "breed is the dog",
                                "two cities", "name of my cat")}  # fmt: skip


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-results")


@pytest.fixture(scope="module")
def bench_url(
    settings: Settings, pool: Any, fake_llm_server: FakeOpenAI, results_dir: Path
) -> Iterator[str]:
    from memora.pipeline.runner import Pipeline

    s = settings.model_copy(
        update={
            "llm_base_url": fake_llm_server.base_url,
            **LLM_TEST_SETTINGS,
            "extractor": "local",
            "bench_results_dir": results_dir,
        }
    )
    with topology(s, pool, Pipeline(s, pool)) as t:
        yield t.url


def bench(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["bench", *args], env=env or {})


def prefix() -> str:
    return f"b{uuid.uuid4().hex[:8]}-"


def operations(url: str, agent: str) -> int:
    ops = httpx.get(f"{url}/api/operations", params={"agent_id": agent, "limit": 500}).json()
    return len(ops["operations"])


def answer_by_question(request: Recorded) -> Reply:
    text = request.content_of("user")
    return Reply(next((a for phrase, a in ANSWERS.items() if phrase in text), "No idea."))


def grade(request: Recorded) -> Reply:
    response = re.search(r"Response: (.*)\n", request.content_of("user"))
    return Reply("yes" if response and response.group(1) in CORRECT else "no")


def script_llm(fake: FakeOpenAI) -> None:
    fake.always(answer_by_question, when=THINK_MARKER)
    fake.always(Reply({"opinions": []}), when=OPINION_MARKER)
    fake.always(grade, when=judge.MARKER)


def check_retrieved(row: dict[str, Any]) -> None:
    """Every memory's evidence mark follows its turn; recall@k follows the marks."""
    evidence = set(row["evidence"])
    for memory in row["retrieved"]:
        assert memory["evidence"] == (memory["turn"] in evidence)
    for k in (5, 10):
        top = {m["turn"] for m in row["retrieved"][:k]}
        if evidence and f"recall@{k}" in row["metrics"]:
            assert row["metrics"][f"recall@{k}"] == pytest.approx(
                len(top & evidence) / len(evidence)
            )


def test_locomo_retrieval_skip_ingestion_and_results_route(
    bench_url: str, results_dir: Path
) -> None:
    p = prefix()
    out = results_dir / "locomo-retrieval.json"
    args = ["locomo", str(DATA / "locomo_tiny.json"), "--base-url", bench_url,
            "--agent-prefix", p]  # fmt: skip
    result = bench(*args, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "recall@10" in result.output and "single-hop" in result.output
    results = json.loads(out.read_text())
    assert (results["benchmark"], results["mode"]) == ("locomo", "retrieval")
    assert results["ingestion"]["documents"] == 2 and results["ingestion"]["items"] == 9
    rows = results["questions"]
    assert [r["category"] for r in rows] == ["single-hop", "temporal", "multi-hop", "open-domain"]
    assert results["overall"]["questions"] == 4
    for row in rows:
        assert row["retrieved"] and "answer" not in row
        check_retrieved(row)
    # the dog's name: its evidence turn is retrieved and marked
    assert any(m["evidence"] and "Biscuit" in m["text"] for m in rows[0]["retrieved"])
    mean = sum(r["metrics"]["mrr"] for r in rows) / 4
    assert results["overall"]["mrr"] == pytest.approx(mean, abs=1e-4)
    assert results["categories"]["temporal"]["questions"] == 1

    agent = f"{p}tiny-1"
    before = operations(bench_url, agent)
    again = bench(*args, "--skip-ingestion", "--max-questions", "2")
    assert again.exit_code == 0, again.output
    assert operations(bench_url, agent) == before  # nothing posted
    missing = bench("locomo", str(DATA / "locomo_tiny.json"), "--base-url", bench_url,
                    "--agent-prefix", prefix(), "--skip-ingestion")  # fmt: skip
    assert missing.exit_code == 2 and "holds no documents" in missing.output

    listed = httpx.get(f"{bench_url}/api/bench/results").json()["files"]
    assert "locomo-retrieval.json" in [f["name"] for f in listed]
    served = httpx.get(f"{bench_url}/api/bench/results/locomo-retrieval.json")
    assert served.status_code == 200 and served.json() == results
    (results_dir.parent / "secret.json").write_text("{}")
    for name, code in (("notes.txt", "invalid_name"), ("..secret.json", "invalid_name"),
                       ("none.json", "not_found")):  # fmt: skip
        refused = httpx.get(f"{bench_url}/api/bench/results/{name}")
        assert refused.json()["error"]["code"] == code, refused.text
    escaped = httpx.get(f"{bench_url}/api/bench/results/..%2Fsecret.json")
    assert escaped.status_code in (404, 422) and "error" in escaped.json()


def test_results_route_without_a_folder(inline_api: Any) -> None:
    response = inline_api.get("/api/bench/results")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "bench_results_not_configured"


def test_longmemeval_retrieval_then_think(
    bench_url: str, fake_llm: FakeOpenAI, results_dir: Path
) -> None:
    p, out = prefix(), results_dir / "lme.json"
    args = ["longmemeval", str(DATA / "longmemeval_tiny.json"), "--base-url", bench_url,
            "--agent-prefix", p, "--out", str(out)]  # fmt: skip
    result = bench(*args)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert set(results["categories"]) == {"single-session-user", "multi-session", "abstention"}
    q1, q2, q3 = results["questions"]
    assert q3["abstention"] and q3["metrics"] == {}  # no retrieval figures for abstention
    for row in (q1, q2):
        turns = list(dict.fromkeys(m["turn"] for m in row["retrieved"]))
        assert all(t for t in turns)  # every memory names its turn
        hit_any = any(t in row["evidence"] for t in turns[:5])
        hit_all = set(row["evidence"]) <= set(turns[:5])
        assert row["metrics"]["turn/recall_any@5"] == float(hit_any)
        assert row["metrics"]["turn/recall_all@5"] == float(hit_all)
        assert 0.0 <= row["metrics"]["session/ndcg_any@5"] <= 1.0
    assert q2["evidence"] == ["answer_s1_1", "answer_s3_1"]
    assert "session/recall_any@10" in results["overall"]

    # the same agents through think, graded by the judge (its own model)
    script_llm(fake_llm)
    env = JUDGE_ENV | {"MEMORA_JUDGE_LLM_BASE_URL": fake_llm.base_url}
    judged = bench(*args, "--skip-ingestion", "--use-think", env=env)
    assert judged.exit_code == 0, judged.output
    results = json.loads(out.read_text())
    assert results["mode"] == "think" and results["ingestion"] is None
    assert [r["correct"] for r in results["questions"]] == [True, True, True]
    assert results["overall"]["accuracy"] == 1.0
    assert results["questions"][0]["metrics_answer"]["f1"] == pytest.approx(
        token_f1("You adopted a greyhound.", "a greyhound"), abs=1e-4
    )
    grading = fake_llm.requests_matching(judge.MARKER)
    assert {r.body["model"] for r in grading} == {"judge-model"} and len(grading) == 3
    assert "does not know" in grading[2].content_of("user")  # the abstention rule
    asked = fake_llm.requests_matching(THINK_MARKER)
    assert len(asked) == 3 and "2024-03-20 10:00" in asked[0].prompt  # question_date


def test_locomo_think_accuracy_and_f1_per_category(
    bench_url: str, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    script_llm(fake_llm)
    out = tmp_path / "locomo-think.json"
    # no judge settings: the judge is the main LLM
    env = NO_LLM | {"MEMORA_LLM_BASE_URL": fake_llm.base_url, "MEMORA_LLM_MODEL": "main-model"}
    args = ["locomo", str(DATA / "locomo_tiny.json"), "--base-url", bench_url]
    result = bench(*args, "--agent-prefix", prefix(), "--use-think", "--out", str(out), env=env)
    assert result.exit_code == 0, result.output
    assert "accuracy" in result.output
    results = json.loads(out.read_text())
    rows = {r["category"]: r for r in results["questions"]}
    assert rows["single-hop"]["answer"] == "Her dog is called Biscuit."
    assert [rows[c]["correct"] for c in ("single-hop", "temporal", "multi-hop", "open-domain")] == [
        True, False, True, False
    ]  # fmt: skip
    assert results["overall"]["accuracy"] == 0.5
    assert results["categories"]["temporal"]["accuracy"] == 0.0
    assert results["categories"]["single-hop"]["f1"] == pytest.approx(1 / 3, abs=1e-4)
    assert rows["temporal"]["judge"] == "no"
    assert {r.body["model"] for r in fake_llm.requests_matching(judge.MARKER)} == {"main-model"}
    # what a question cost: think's calls (the answer, the opinions drawn from it) as the
    # server counted them, the judge's as the command did; the fake counts 4 characters a token
    for row in rows.values():
        think_used, judge_used = row["usage"]["think"], row["usage"]["judge"]
        assert think_used["requests"] == 2 and think_used["prompt_tokens"] > 0
        assert judge_used["requests"] == 1 and judge_used["completion_tokens"] >= 1
    per_question = results["llm_usage_per_question"]
    assert per_question["think"]["requests"] == 2.0 and per_question["judge"]["requests"] == 1.0
    assert per_question["judge"]["prompt_tokens"] == pytest.approx(
        sum(r["usage"]["judge"]["prompt_tokens"] for r in rows.values()) / len(rows), abs=0.1
    )


def test_use_think_without_an_llm_is_a_clear_error(bench_url: str) -> None:
    p = prefix()
    result = bench("locomo", str(DATA / "locomo_tiny.json"), "--base-url", bench_url,
                   "--agent-prefix", p, "--use-think", env=NO_LLM)  # fmt: skip
    assert result.exit_code == 2
    assert "--use-think needs a judge LLM" in result.output
    assert operations(bench_url, f"{p}tiny-1") == 0  # nothing ingested


def test_locomo_follow_up_counts_the_search_llm_per_question(
    bench_url: str, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    fake_llm.always(Reply({"queries": ["Biscuit the dog"]}), when=FOLLOW_UP_MARKER)
    out = tmp_path / "locomo-follow-up.json"
    args = ["locomo", str(DATA / "locomo_tiny.json"), "--base-url", bench_url]
    result = bench(*args, "--agent-prefix", prefix(), "--follow-up", "--out", str(out), env=NO_LLM)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["mode"] == "retrieval" and results["options"]["follow_up"] is True
    rows = results["questions"]
    assert rows and all(r["follow_up_queries"] == ["Biscuit the dog"] for r in rows)
    assert all(r["follow_up_error"] is None for r in rows)
    for row in rows:
        check_retrieved(row)
        assert row["usage"]["search"]["requests"] == 1 and "think" not in row["usage"]
    assert results["llm_usage_per_question"]["search"]["requests"] == 1.0
    assert len(fake_llm.requests_matching(FOLLOW_UP_MARKER)) == len(rows)
