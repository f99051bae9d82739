"""The memory lifecycle over HTTP on the README's port, against the suite's PostgreSQL (and the
fake LLM server where an LLM decides): remember, forget, restore, purge, recall, link, reflect.
The write API under uvicorn forwards the operations to the query service under uvicorn and
serves the memory's view (`GET …/memories/{id}`) itself, as deployed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from memora.basics.config import Settings
from memora.lifecycle.memory import CONFLICT_MARKER
from memora.lifecycle.reflect import REFLECT_MARKER
from memora.retrieval import SearchParams
from memora.think.reasoning import OPINION_MARKER, THINK_MARKER
from tests.fakes import FakeOpenAI, Reply
from tests.integration.stack_support import Client, topology

pytestmark = pytest.mark.integration


@contextmanager
def _client(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Client]:
    with topology(settings, pool, pipeline) as t, Client(t) as client:
        yield client


@pytest.fixture(scope="module")
def api(settings: Settings, pool: Any, pipeline: Any) -> Iterator[Client]:
    with _client(settings, pool, pipeline) as client:
        yield client


@pytest.fixture()
def llm_api(llm_settings: Settings, pool: Any, pipeline: Any) -> Iterator[Client]:
    with _client(llm_settings, pool, pipeline) as client:
        yield client


def remember(api: Any, agent: str, content: str, **extra: Any) -> dict[str, Any]:
    r = api.post(f"/api/agents/{agent}/remember", json={"content": content, **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


def search_ids(api: Any, agent: str, query: str) -> set[str]:
    """Ids every retriever returns (the search's trace lists each retriever's results)."""
    r = api.post("/api/search", json={"agent_id": agent, "query": query, "trace": True})
    assert r.status_code == 200, r.text
    body = r.json()
    found = {h["id"] for h in body["results"]}
    for path in body["trace"]["paths"].values():
        found |= {x["id"] for x in path["results"]}
    return found


def test_remember_skip_merge_supersede_add(api: Any, agent_id: str) -> None:
    first = remember(api, agent_id, "Alice lives in Paris.", category="home", importance=8)
    assert first["decision"] == "ADD"
    assert remember(api, agent_id, "alice lives in paris")["decision"] == "SKIP"
    moved = remember(api, agent_id, "Alice moved to Berlin.")
    assert moved["decision"] == "SUPERSEDE" and moved["superseded_id"] == first["memory_id"]
    other = remember(api, agent_id, "Bob lives in Rome.")
    assert other["decision"] == "ADD"
    old = api.get(f"/api/agents/{agent_id}/memories/{first['memory_id']}").json()
    assert old["status"] == "superseded" and old["superseded_by"] == moved["memory_id"]
    assert [e["event"] for e in old["history"]] == ["added", "superseded"]
    assert first["memory_id"] not in search_ids(api, agent_id, "Where does Alice live? Paris")
    assert moved["memory_id"] in search_ids(api, agent_id, "Where does Alice live? Berlin")
    # restorable: back in search
    restored = api.post(f"/api/agents/{agent_id}/memories/{first['memory_id']}/restore")
    assert restored.status_code == 200 and restored.json()["restored"] is True
    assert first["memory_id"] in search_ids(api, agent_id, "Alice lives in Paris")


def test_merge_counts_evidence_and_keeps_the_richer_text(api: Any, agent_id: str) -> None:
    a = remember(api, agent_id, "Alice adopted a dog named Rex.")
    b = remember(api, agent_id, "Alice adopted a dog named Rex from the city shelter.")
    assert b["decision"] == "MERGE" and b["memory_id"] == a["memory_id"]
    view = api.get(f"/api/agents/{agent_id}/memories/{a['memory_id']}").json()
    assert view["evidence_count"] == 2 and view["text"].endswith("city shelter.")
    assert [e["event"] for e in view["history"]] == ["added", "merged"]
    assert remember(api, agent_id, "Alice adopted 2 dogs named Rex.")["decision"] == "ADD"


def test_edit_makes_a_new_version_and_keeps_the_old(api: Any, agent_id: str) -> None:
    old = remember(api, agent_id, "Dana works as a nurse in Leeds.", category="work", importance=7)
    url = f"/api/agents/{agent_id}/memories"
    r = api.patch(
        f"{url}/{old['memory_id']}", json={"content": "Dana works as a surgeon in Leeds."}
    )
    assert r.status_code == 200, r.text
    new_id = r.json()["memory_id"]
    assert new_id != old["memory_id"] and r.json()["superseded_id"] == old["memory_id"]
    new = api.get(f"{url}/{new_id}").json()
    assert new["text"] == "Dana works as a surgeon in Leeds." and new["status"] == "active"
    assert (new["category"], new["importance"], new["replaced"]) == ("work", 7, [old["memory_id"]])
    assert [(e["event"], e["reason"]) for e in new["history"]] == [("added", "edited by the user")]
    before = api.get(f"{url}/{old['memory_id']}").json()
    assert before["status"] == "superseded" and before["superseded_by"] == new_id
    assert [e["event"] for e in before["history"]] == ["added", "superseded"]
    assert before["history"][1]["details"]["new_text"] == new["text"]
    assert new_id in search_ids(api, agent_id, "Dana surgeon Leeds")
    assert old["memory_id"] not in search_ids(api, agent_id, "Dana nurse Leeds")
    # refusals: a superseded version, the same text, empty text, an unknown id; nothing written
    for target, body, status, code in (
        (old["memory_id"], {"content": "Dana is a vet."}, 409, "memory_not_active"),
        (new_id, {"content": " Dana works as a surgeon in Leeds. "}, 422, "unchanged"),
        (new_id, {"content": "   "}, 422, "empty_content"),
        ("6f1c1b0e-5a0e-4a43-9f39-1d0c2f1f6d11", {"content": "x"}, 404, "memory_not_found"),
    ):
        r = api.patch(f"{url}/{target}", json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
    assert api.get(f"{url}/{new_id}").json()["history"] == new["history"]


def test_forget_restore_and_purge(api: Any, agent_id: str, pool: Any, settings: Settings) -> None:
    from memora.jobs import JOBS, JobContext, run_job
    from memora.pipeline.backend import InlineBackend
    from memora.pipeline.runner import Pipeline

    kept = remember(api, agent_id, "Carol plays the violin in an orchestra.")
    gone = remember(api, agent_id, "Carol's bank PIN is written on a yellow note.")
    url = f"/api/agents/{agent_id}"
    r = api.post(f"{url}/forget", json={"memory_id": gone["memory_id"], "reason": "secret"})
    assert r.status_code == 200 and r.json()["forgotten"][0]["id"] == gone["memory_id"]
    assert gone["memory_id"] not in search_ids(api, agent_id, "Carol bank PIN yellow note")
    assert api.post(f"{url}/memories/{gone['memory_id']}/restore").json()["restored"]
    assert gone["memory_id"] in search_ids(api, agent_id, "Carol bank PIN yellow note")
    api.post(f"{url}/forget", json={"memory_id": gone["memory_id"], "reason": "secret"})

    # past retention: restore refuses (410), cleanup purges for real
    with pool.connection() as conn:
        conn.execute(
            "UPDATE memory_units SET status_at = status_at - %s WHERE id = %s",
            (timedelta(days=settings.forget_retention_days + 1), gone["memory_id"]),
        )
    r = api.post(f"{url}/memories/{gone['memory_id']}/restore")
    assert r.status_code == 410 and r.json()["error"]["code"] == "retention_expired"
    ctx = JobContext(settings, pool, InlineBackend(Pipeline(settings, pool)), agent_key=agent_id)
    result = run_job(JOBS["cleanup"], ctx)
    assert result.changed == 1
    assert api.get(f"{url}/memories/{gone['memory_id']}").status_code == 404
    with pool.connection() as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM memory_links WHERE from_unit = %(i)s OR to_unit = %(i)s)"
            " + (SELECT count(*) FROM unit_entities WHERE unit_id = %(i)s) AS n",
            {"i": gone["memory_id"]},
        ).fetchone()
        events = conn.execute(
            "SELECT event FROM memory_events WHERE unit_id = %s ORDER BY id", (gone["memory_id"],)
        ).fetchall()
    assert left["n"] == 0
    assert [e["event"] for e in events][-1] == "purged"
    assert api.get(f"{url}/memories/{kept['memory_id']}").json()["status"] == "active"


def test_forget_by_query_dry_run_cap_and_threshold(
    api: Any, agent_id: str, settings: Settings
) -> None:
    url = f"/api/agents/{agent_id}"
    ids = [remember(api, agent_id, f"Dana visited museum number {i} in Vienna.")["memory_id"]
           for i in range(3)]  # fmt: skip
    unrelated = remember(api, agent_id, "Eve bakes sourdough bread every Sunday.")["memory_id"]
    dry = api.post(f"{url}/forget", json={"query": "Dana museum visits in Vienna", "dry_run": True})
    assert dry.status_code == 200
    listed = {m["id"] for m in dry.json()["forgotten"]}
    assert listed == set(ids) and unrelated not in listed
    for i in [*ids, unrelated]:
        assert api.get(f"{url}/memories/{i}").json()["status"] == "active"
    bad = api.post(f"{url}/forget", json={"query": "x", "memory_id": ids[0]})
    assert bad.status_code == 422
    done = api.post(f"{url}/forget", json={"query": "Dana museum visits in Vienna"})
    assert {m["id"] for m in done.json()["forgotten"]} == set(ids)
    assert api.get(f"{url}/memories/{unrelated}").json()["status"] == "active"


def test_forget_by_query_refuses_above_the_cap(
    settings: Settings, pool: Any, pipeline: Any, agent_id: str
) -> None:
    capped = settings.model_copy(update={"forget_query_cap": 2})
    with _client(capped, pool, pipeline) as api:
        for i in range(3):
            remember(api, agent_id, f"Frank ran marathon number {i} in Boston.")
        r = api.post(f"/api/agents/{agent_id}/forget", json={"query": "Frank marathons Boston"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "too_many_matches"
        r = api.post(
            f"/api/agents/{agent_id}/forget",
            json={"query": "Frank marathons Boston", "confirm": True},
        )
        assert len(r.json()["forgotten"]) == 3


def test_recall_scores_filters_and_updates_access(api: Any, agent_id: str) -> None:
    url = f"/api/agents/{agent_id}"
    low = remember(api, agent_id, "Gina's sister likes green tea.", importance=1, category="family")
    high = remember(api, agent_id, "Gina is allergic to green tea.", importance=10,
                    category="health")  # fmt: skip
    r = api.post(f"{url}/recall", json={"query": "Gina green tea", "limit": 5})
    assert r.status_code == 200, r.text
    found = r.json()["memories"]
    assert [m["id"] for m in found][:2] == [high["memory_id"], low["memory_id"]]
    assert found[0]["access_count"] >= 1 and found[0]["last_accessed_at"]
    only = api.post(f"{url}/recall", json={"query": "Gina green tea", "categories": ["family"]})
    assert [m["id"] for m in only.json()["memories"]] == [low["memory_id"]]
    bad = api.post(
        f"{url}/recall",
        json={"query": "q", "time_range": {"start": "2025-01-02", "end": "2025-01-01"}},
    )
    assert bad.status_code == 422


def test_link_is_bidirectional_and_followed_by_graph(api: Any, agent_id: str) -> None:
    url = f"/api/agents/{agent_id}"
    a = remember(api, agent_id, "Hank's project codename is Bluebird.")["memory_id"]
    b = remember(api, agent_id, "The quarterly budget was approved in March.")["memory_id"]
    r = api.post(
        f"{url}/link", json={"memory_id": a, "related_memory_id": b, "relationship": "funds"}
    )
    assert r.status_code == 200, r.text
    links = api.get(f"{url}/memories/{b}").json()["links"]
    assert any(x["target"] == a and x["relationship"] == "funds" for x in links)
    assert api.post(f"{url}/link", json={"memory_id": a, "related_memory_id": a}).status_code == 422
    missing = "00000000-0000-0000-0000-000000000000"
    r = api.post(f"{url}/link", json={"memory_id": a, "related_memory_id": missing})
    assert r.status_code == 404


def test_reflect_needs_an_llm(api: Any, agent_id: str) -> None:
    remember(api, agent_id, "Ivy likes Python.")
    r = api.post(f"/api/agents/{agent_id}/reflect", json={})
    assert r.status_code == 503 and r.json()["error"]["code"] == "llm_not_configured"


def test_reflect_stores_linked_reflections(
    llm_api: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    fake_llm.always(Reply({"decision": "ADD", "reason": "different"}), when=CONFLICT_MARKER)
    ids = [remember(llm_api, agent_id, t)["memory_id"] for t in
           ("Ivy likes Python.", "Ivy dislikes Java.", "Ivy uses VS Code every day.")]  # fmt: skip
    fake_llm.script(
        Reply({"insights": [{"text": "Ivy prefers Python development in VS Code.",
                             "sources": [1, 2, 3], "importance": 7}]}),
        when=REFLECT_MARKER,
    )  # fmt: skip
    r = llm_api.post(f"/api/agents/{agent_id}/reflect", json={"topic": "Ivy programming"})
    assert r.status_code == 200, r.text
    [made] = r.json()["reflections"]
    assert set(made["sources"]) == set(ids)
    view = llm_api.get(f"/api/agents/{agent_id}/memories/{made['id']}").json()
    assert view["fact_type"] == "reflection"
    assert {x["target"] for x in view["links"] if x["type"] == "reflection"} == set(ids)
    recalled = llm_api.post(f"/api/agents/{agent_id}/recall", json={"query": "Ivy Python VS Code"})
    assert made["id"] in {m["id"] for m in recalled.json()["memories"]}
    without = llm_api.post(
        f"/api/agents/{agent_id}/recall",
        json={"query": "Ivy Python VS Code", "include_reflections": False},
    )
    assert made["id"] not in {m["id"] for m in without.json()["memories"]}
    # /api/search: reflections when asked for by fact_type; the default searches the networks
    query = {"agent_id": agent_id, "query": "Ivy Python VS Code"}
    asked = llm_api.post("/api/search", json=query | {"fact_type": ["reflection"]}).json()
    assert [(r["id"], r["fact_type"]) for r in asked["results"]] == [(made["id"], "reflection")]
    default = llm_api.post("/api/search", json=query).json()["results"]
    assert default and made["id"] not in {r["id"] for r in default}
    # think: the reflection is searched and given to the LLM, unless include_reflections=false
    fake_llm.always(Reply("I prefer Python in VS Code."), when=THINK_MARKER)
    fake_llm.always(Reply({"opinions": []}), when=OPINION_MARKER)
    thought = llm_api.post("/api/think", json=query | {"query": "Which tools does Ivy like?"})
    assert thought.status_code == 200, thought.text
    assert made["id"] in {e["id"] for e in thought.json()["based_on"]["reflection"]}
    prompt = fake_llm.requests_matching(THINK_MARKER)[-1].content_of("user")
    assert "MY REFLECTIONS" in prompt and "Ivy prefers Python development in VS Code." in prompt
    plain = llm_api.post(
        "/api/think",
        json=query | {"query": "Which tools does Ivy like?", "include_reflections": False},
    )
    assert plain.status_code == 200 and "reflection" not in plain.json()["based_on"]
    prompt = fake_llm.requests_matching(THINK_MARKER)[-1].content_of("user")
    assert "MY REFLECTIONS" not in prompt


def test_llm_decides_supersede(llm_api: Any, fake_llm: FakeOpenAI, agent_id: str) -> None:
    first = remember(llm_api, agent_id, "Jack drives a red Toyota.")  # no candidates: no call
    fake_llm.script(Reply({"decision": "SUPERSEDE", "memory": 1, "reason": "new car"}),
                    when=CONFLICT_MARKER)  # fmt: skip
    # the rules read no change here (ADD): the LLM decides
    second = remember(llm_api, agent_id, "Jack's garage now holds a blue Tesla instead.")
    assert second["decision"] == "SUPERSEDE" and second["decided_by"] == "llm"
    assert second["superseded_id"] == first["memory_id"]
    assert "Jack drives a red Toyota." in fake_llm.requests_matching(CONFLICT_MARKER)[0].prompt


def test_rules_decide_the_changes_they_are_sure_of(
    llm_api: Any, fake_llm: FakeOpenAI, agent_id: str
) -> None:
    """A change the rules read with certainty is theirs (no LLM call), dated when it says."""
    first = remember(llm_api, agent_id, "Lena lives in Graz.")
    asked = len(fake_llm.requests_matching(CONFLICT_MARKER))
    second = remember(llm_api, agent_id, "Lena moved to Salzburg in March 2024.")
    assert second["decision"] == "SUPERSEDE" and second["decided_by"] == "rules"
    assert second["superseded_id"] == first["memory_id"]
    assert len(fake_llm.requests_matching(CONFLICT_MARKER)) == asked
    view = llm_api.get(f"/api/agents/{agent_id}/memories/{first['memory_id']}").json()
    [event] = [e for e in view["history"] if e["event"] == "superseded"]
    assert event["details"]["effective_at"].startswith("2024-03-01")


def test_search_params_default_excludes_inactive(api: Any, agent_id: str) -> None:
    """The retriever itself (not only the API) skips forgotten memories."""
    m = remember(api, agent_id, "Kate keeps bees on her roof.")["memory_id"]
    api.post(f"/api/agents/{agent_id}/forget", json={"memory_id": m})
    retriever = api.app.state.retriever
    hits = retriever.search(SearchParams(agent_id=agent_id, query="Kate bees roof"))
    assert m not in {str(h.id) for h in hits.hits}
