"""The read path through the query service's API, on real PostgreSQL + pgvector: graph and
temporal retrieval, fact-type filters, agent isolation, the cross-encoder, access counts,
the token budget and bad input (seed 000 §3, seed 003 "Search Memories")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from memora.basics.config import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def query_api(settings: Settings, pool: Any) -> Iterator[TestClient]:
    from services.api.query_app import create_app

    with TestClient(create_app(settings, pool=pool)) as client:
        yield client


def _ingest(api: Any, agent_id: str, items: list[dict[str, Any]], doc: str = "d1") -> None:
    body = {"agent_id": agent_id, "document_id": doc, "items": items}
    response = api.post("/api/memories/batch", json=body)
    assert response.status_code == 200, response.text
    op = api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed", op


def _ingest_turns(api: Any, agent_id: str, turns: list[tuple[str, str]], hour: str) -> None:
    """(speaker, text) turns, a minute apart from `hour` (an ISO date and hour) on."""
    _ingest(api, agent_id, [
        {"content": text, "speaker": speaker, "event_date": f"{hour}:{10 + n}:00Z"}
        for n, (speaker, text) in enumerate(turns)
    ])  # fmt: skip


def _ingest_sample(api: Any, agent_id: str) -> None:
    """`memora demo`'s bundled conversations, one document each."""
    from memora.interchange.archives import read_documents, sample_archive

    for doc in read_documents(sample_archive(), "jsonl"):
        items = [i.model_dump(mode="json", exclude_none=True) for i in doc.items]
        _ingest(api, agent_id, items, doc=doc.document_id)


def _search(api: TestClient, path: str = "/api/search", **body: Any) -> dict[str, Any]:
    response = api.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _ids(trace: dict[str, Any], path: str) -> set[str]:
    return {r["id"] for r in trace["paths"][path]["results"]}


def _texts(result: dict[str, Any]) -> list[str]:
    return [r["text"] for r in result["results"]]


WORK = [
    {"content": "Alice works at Google as a software engineer.", "event_date": "2024-03-01"},
    {"content": "Alice said her favourite snack is salted licorice.", "event_date": "2024-03-20"},
    {"content": "The weather in Lisbon was rainy all week.", "event_date": "2024-03-02"},
    {"content": "Bob repaired his old bicycle in the garage.", "event_date": "2024-03-05"},
]


HOBBIES = [
    {"content": "Alice goes rock climbing every weekend.", "event_date": "2024-03-09"},
    {"content": "Alice took up pottery and made a lopsided bowl.", "event_date": "2024-03-16"},
    {"content": "Alice spends her evenings playing the cello.", "event_date": "2024-03-23"},
    {"content": "The office printer jammed again on Monday.", "event_date": "2024-03-04"},
]


def test_graph_finds_an_entity_linked_memory_that_semantic_search_misses(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(inline_api, agent_id, WORK)
    result = _search(
        query_api,
        agent_id=agent_id,
        query="Who is employed as a software engineer at Google?",
        trace=True,
    )
    trace = result["trace"]
    by_text = {r["text"]: r["id"] for r in result["results"]}
    licorice = by_text["Alice said her favourite snack is salted licorice."]
    google = by_text["Alice works at Google as a software engineer."]
    assert _texts(result)[0] == "Alice works at Google as a software engineer."
    assert google in _ids(trace, "semantic") and google in _ids(trace, "graph")
    # reached only through the "Alice" entity link
    assert licorice in _ids(trace, "graph")
    assert licorice not in _ids(trace, "semantic") | _ids(trace, "keyword")
    graph = trace["paths"]["graph"]["results"]
    assert graph[0]["id"] == google and graph[0]["score"] == 1.0  # the entry point
    assert {r["id"]: r["score"] for r in graph}[licorice] == pytest.approx(0.8)  # one hop
    assert trace["paths"]["temporal"]["ran"] is False
    assert trace["time_range"] is None
    assert set(trace["timings_ms"]) >= {"embed", "retrieval", "fusion", "rerank", "mmr", "total"}
    for field in ("id", "text", "context", "event_date", "weight", "fact_type"):
        assert field in result["results"][0]


def test_search_answers_are_compressed_when_asked(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest_sample(inline_api, agent_id)
    body = {"agent_id": agent_id, "query": "Where does Maya live?", "top_k": 20}
    asked = query_api.post("/api/search", json=body, headers={"Accept-Encoding": "gzip"})
    plain = query_api.post("/api/search", json=body, headers={"Accept-Encoding": "identity"})
    assert len(plain.content) > 1024  # smaller answers are sent as they are
    assert asked.headers.get("content-encoding") == "gzip"
    assert "content-encoding" not in plain.headers
    # httpx decodes it (two searches: the first one's accesses may reorder the second's)
    assert {r["id"] for r in asked.json()["results"]} == {r["id"] for r in plain.json()["results"]}


def test_entity_path_finds_what_a_named_person_said_without_the_querys_words(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(
        inline_api,
        agent_id,
        [
            {"content": "Priya Raman said the sourdough starter finally bubbled after three days.",
             "event_date": "2024-05-01T10:00:00Z"},
            {"content": "Priya Raman said hello to everyone at the meetup.",
             "event_date": "2024-05-02T10:00:00Z"},
            {"content": "Marco Rossi fixed the garden fence.",
             "event_date": "2024-05-03T10:00:00Z"},
        ],
    )  # fmt: skip
    result = _search(query_api, agent_id=agent_id, query="What was Priya Raman baking?", trace=True)
    trace = result["trace"]
    by_text = {r["text"]: r["id"] for r in result["results"]}
    sourdough = by_text["Priya Raman said the sourdough starter finally bubbled after three days."]
    hello = by_text.get("Priya Raman said hello to everyone at the meetup.")
    entity = trace["paths"]["entity"]
    assert entity["ran"] is True
    # Priya's memories by similarity to "What was baking?": the sourdough one first, the
    # greeting (below MEMORA_ENTITY_MIN_SIMILARITY) left out; Marco's is not hers
    found = [r["id"] for r in entity["results"]]
    assert found[0] == sourdough and set(found) <= {sourdough, hello}
    # judged on what it says, the sourdough memory comes first although it shares no word
    # but the name with the question, while the greeting shares the name alone
    assert _texts(result)[0].startswith("Priya Raman said the sourdough")
    assert [c["ranks"].get("entity") for c in trace["candidates"] if c["id"] == sourdough] == [1]


def test_the_demos_where_question_puts_a_turn_naming_her_workplace_first(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    """`memora demo`'s first question on its bundled sample (issue 25): "where" is a stop word,
    so BM25 and the name-less embedding both see "Maya work" and put "…I'm working from the
    couch" first; the answer-type signal lifts the turns that name an organisation or a place,
    and the relation signal the turn her works_at was read from."""
    _ingest_sample(inline_api, agent_id)
    result = _search(
        query_api, agent_id=agent_id, query="Where does Maya work?", top_k=3, trace=True
    )
    texts = _texts(result)
    # her works_at Northwind Robotics, read from the turn that accepts the offer (issue 59)
    assert "accepted the offer from Northwind Robotics" in texts[0], texts
    trace = result["trace"]
    marked = [c for c in trace["candidates"] if c["states_relation"]]
    assert [c["id"] for c in marked] == [result["results"][0]["id"]]
    assert trace["answer_type"] == {"entity_types": ["LOCATION", "ORGANIZATION"], "time": False}
    typed = {c["id"]: c["answer_type"] for c in trace["candidates"]}
    ids = {r["text"]: r["id"] for r in result["results"]}
    assert typed[ids[texts[0]]] is True
    couch = [t for t in texts if "working from the couch" in t]
    # the turn that only says "working" names no place or organisation (Pixel is its cat)
    assert all(typed[ids[t]] is False for t in couch)


def test_a_relation_question_lifts_the_turns_that_state_the_relations_it_walks(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    """Issue 59, bridging: "Where does Marek's girlfriend work?" walks partner_of from Marek
    (to Tereza), then works_at from her; the turns the relation reader read those relations
    from are marked and lifted above the turns that only say "work" or "girlfriend"."""
    turns = [
        ("Marek", "Work is crazy this week, the work never stops at the bakery."),
        ("Marek", "My girlfriend Tereza and I adopted a cat."),
        ("Lucia", "Does your girlfriend like her work? My work is so boring."),
        ("Marek", "Tereza is a librarian at the Brno City Library."),
        ("Lucia", "Girlfriend, work, cats: you have it all figured out, Marek!"),
    ]
    _ingest_turns(inline_api, agent_id, turns, "2024-05-02T18")
    query = "Where does Marek's girlfriend work?"
    result = _search(query_api, agent_id=agent_id, query=query, top_k=5, trace=True)
    texts = _texts(result)
    stating = {"My girlfriend Tereza", "Tereza is a librarian"}
    assert {t.split(": ", 1)[1][:21].rstrip() for t in texts[:2]} == stating, texts
    assert result["trace"]["relation_path"] == [["partner_of"], ["works_at"]]
    marked = {c["id"]: c["states_relation"] for c in result["trace"]["candidates"]}
    for hit in result["results"]:
        said = hit["text"].split(": ", 1)[1]
        assert marked[hit["id"]] is any(said.startswith(s) for s in stating), hit["text"]
    # who someone is: every relation of theirs, one hop
    who = _search(query_api, agent_id=agent_id, query="Who is Tereza?", top_k=5, trace=True)
    assert {t.split(": ", 1)[1][:21].rstrip() for t in _texts(who)[:2]} == stating, _texts(who)
    off = _search(
        query_api, agent_id=agent_id, query="What did Marek and Tereza adopt?", trace=True
    )
    assert not any(c["states_relation"] for c in off["trace"]["candidates"])


def test_what_a_person_said_comes_before_the_turns_that_address_them(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    """Issue 59: a friend's reply names the person asked about and repeats the question's
    words; the person's own turn says what happened. The speaker signal marks (and lifts) the
    turns said by the person the question names."""
    turns = [
        ("Jonas", "Ines, did you start that course you kept talking about?"),
        ("Ines", "Yes! Evening ceramics at the college, on Tuesdays and Thursdays."),
        ("Jonas", "Wow, Ines, a course! You always loved making things, Ines."),
        ("Ines", "The first bowl came out lopsided, but I love it."),
        ("Jonas", "Ines, I bet the course teacher loves your bowls."),
        ("Jonas", "My week was all deadlines at the logistics firm."),
    ]
    _ingest_turns(inline_api, agent_id, turns, "2024-04-02T19")
    result = _search(
        query_api, agent_id=agent_id, query="What course did Ines start?", top_k=5, trace=True
    )
    texts = _texts(result)
    rank = {text.split(": ", 1)[1][:12]: n for n, text in enumerate(texts)}
    # the answer above the turns that only address her (Jonas's question that mirrors the
    # query's words may stay first: it is what the answer replies to)
    assert rank["Yes! Evening"] < min(rank["Wow, Ines, a"], rank["Ines, I bet "]), texts
    candidates = {c["id"]: c for c in result["trace"]["candidates"]}
    for hit in result["results"]:
        said = candidates[hit["id"]]["said_by_named"]
        assert said is (hit["metadata"].get("speaker") == "Ines"), hit
    # the answer is next to the question that holds the query's words (context keyword)
    answer = next(h["id"] for h in result["results"] if "Yes! Evening" in h["text"])
    assert candidates[answer]["context_keyword"] > 0.5
    # what each turn states (the statement signal): Jonas's question states nothing, the
    # answer most of its words ("Yes!" exclaims), his last turn all of them
    statement = {
        hit["text"].split(": ", 1)[1][:12]: candidates[hit["id"]]["statement"]
        for hit in result["results"]
    }
    assert statement.get("Ines, did yo", 0.0) == 0.0
    assert 0.8 < statement["Yes! Evening"] < 1.0


def test_the_demos_allergy_question_puts_mayas_statement_before_the_echo(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    """Issue 59's example: "I'll remember the allergy" (the assistant) holds the question's
    word and names nobody; Maya's own turn says what the allergy is. Said by the person asked
    about (speaker) and next to the echo's word match (context keyword), hers comes first."""
    _ingest_sample(inline_api, agent_id)
    result = _search(
        query_api, agent_id=agent_id, query="Does Maya have any allergies?", top_k=3, trace=True
    )
    texts = _texts(result)
    assert "allergic to bee stings" in texts[0], texts
    candidates = {c["id"]: c for c in result["trace"]["candidates"]}
    first = candidates[result["results"][0]["id"]]
    assert first["said_by_named"] is True and first["context_keyword"] > 0


def test_entity_path_does_not_run_when_the_query_names_no_known_entity(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(inline_api, agent_id, WORK)
    trace = _search(query_api, agent_id=agent_id, query="Who likes licorice?", trace=True)["trace"]
    assert trace["paths"]["entity"] == {
        "ran": False, "ms": 0.0, "count": 0, "note": "the query names no known entity",
        "results": [],
    }  # fmt: skip


def test_temporal_path_keeps_alices_june_and_drops_bob_and_other_months(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(
        inline_api,
        agent_id,
        [
            {"content": "Alice went kayaking on the lake with her sister.",
             "event_date": "2024-06-10T10:00:00Z"},
            {"content": "Bob went kayaking on the lake.", "event_date": "2024-06-10T11:00:00Z"},
            {"content": "Alice went skiing in the Alps.", "event_date": "2024-01-15T10:00:00Z"},
            {"content": "Alice kayaked on Lake Tahoe.", "event_date": "2023-06-12T10:00:00Z"},
        ],
    )  # fmt: skip
    result = _search(
        query_api,
        agent_id=agent_id,
        query="What did Alice do in June?",
        reference_time="2024-09-01T00:00:00Z",
        trace=True,
    )
    trace = result["trace"]
    assert trace["time_range"]["start"].startswith("2024-06-01")
    assert trace["time_range"]["end"].startswith("2024-07-01")
    by_text = {r["text"]: r["id"] for r in result["results"]}
    temporal = _ids(trace, "temporal")
    assert temporal == {by_text["Alice went kayaking on the lake with her sister."]}
    assert trace["paths"]["temporal"]["ran"] is True


def test_fact_type_filters_and_network_routes(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(
        inline_api,
        agent_id,
        [
            {"content": "Assistant: I recommended Yosemite National Park to Alice for hiking."},
            {"content": "Alice loves hiking in Yosemite National Park."},
        ],
    )
    query = {"agent_id": agent_id, "query": "Yosemite hiking"}
    every = _search(query_api, **query)
    assert {r["fact_type"] for r in every["results"]} == {"world", "agent"}
    agent = _search(query_api, "/api/agent_search", **query)
    assert [r["fact_type"] for r in agent["results"]] == ["agent"]
    world = _search(query_api, "/api/world_search", **query)
    assert [r["fact_type"] for r in world["results"]] == ["world"]
    assert _search(query_api, "/api/opinion_search", **query)["results"] == []
    only_world = _search(query_api, **query, fact_type=["world"])
    assert [r["text"] for r in only_world["results"]] == [r["text"] for r in world["results"]]


def test_agents_never_see_each_others_memories(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    other = f"{agent_id}-other"
    _ingest(inline_api, agent_id, [{"content": "Maya's passport number ends in 4417."}])
    _ingest(inline_api, other, [{"content": "Ravi keeps his passport in the blue drawer."}])
    mine = _search(query_api, agent_id=agent_id, query="passport", trace=True)
    theirs = _search(query_api, agent_id=other, query="passport", trace=True)
    assert _texts(mine) == ["Maya's passport number ends in 4417."]
    assert _texts(theirs) == ["Ravi keeps his passport in the blue drawer."]
    for trace in (mine["trace"], theirs["trace"]):
        assert all(len(p["results"]) <= 1 for p in trace["paths"].values())
    assert _search(query_api, agent_id="nobody-at-all", query="passport")["results"] == []


def test_cross_encoder_reranks_with_the_local_model(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(inline_api, agent_id, WORK)
    body = {"agent_id": agent_id, "query": "Where does Alice work?", "trace": True}
    heuristic = _search(query_api, **body)
    cross = _search(query_api, **body, reranker="cross-encoder")
    assert cross["trace"]["reranker"] == "cross-encoder"
    assert {r["id"] for r in cross["results"]} == {r["id"] for r in heuristic["results"]}
    assert all(0.0 <= r["weight"] <= 1.0 for r in cross["results"])  # sigmoid scores
    candidates = cross["trace"]["candidates"]
    assert len({round(c["score"], 6) for c in candidates}) > 1  # the model scored each pair


def test_heuristic_adds_the_similarity_to_the_first_passs_best_candidates(
    inline_api: Any, query_api: TestClient, pool: Any, settings: Settings, agent_id: str
) -> None:
    """Pseudo-relevance feedback: each candidate's `feedback` is its cosine similarity to the
    centroid of the MEMORA_HEURISTIC_FEEDBACK_TOP candidates the first pass scored best, and
    its score is the first pass plus MEMORA_HEURISTIC_FEEDBACK_WEIGHT times that."""
    _ingest(inline_api, agent_id, WORK + HOBBIES)
    trace = _search(query_api, agent_id=agent_id, query="What does Alice do for fun?", trace=True)[
        "trace"
    ]
    candidates = trace["candidates"]
    assert len(candidates) > settings.heuristic_feedback_top
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT id::text, embedding FROM memory_units WHERE agent_id = %s", (agent_id,)
        ).fetchall()
    vectors = {r["id"]: np.asarray(r["embedding"].to_numpy(), dtype=np.float64) for r in rows}
    weight = settings.heuristic_feedback_weight
    assert weight > 0
    first_pass = {c["id"]: c["score"] - weight * c["feedback"] for c in candidates}
    best = sorted(first_pass, key=lambda i: -first_pass[i])[: settings.heuristic_feedback_top]
    centroid = np.mean([vectors[i] for i in best], axis=0)
    centroid /= np.linalg.norm(centroid)
    for c in candidates:
        expected = max(0.0, float(vectors[c["id"]] @ centroid))
        assert c["feedback"] == pytest.approx(expected, abs=1e-4)
    # a memory unlike the first pass's best gains least
    feedbacks = {c["id"]: c["feedback"] for c in candidates}
    assert min(feedbacks.values()) < max(feedbacks[i] for i in best)


def test_returned_memories_have_their_access_counted(
    inline_api: Any, query_api: TestClient, pool: Any, agent_id: str
) -> None:
    _ingest(inline_api, agent_id, WORK)
    first = _search(query_api, agent_id=agent_id, query="Alice", top_k=2)
    _search(query_api, agent_id=agent_id, query="Alice", top_k=2)
    query_api.app.state.retriever.access.flush()  # type: ignore[attr-defined]
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT u.text, coalesce(a.access_count, 0) AS n FROM memory_units u "
            "LEFT JOIN memory_access a ON a.unit_id = u.id WHERE u.agent_id = %s",
            (agent_id,),
        ).fetchall()
    counts = {r["text"]: r["n"] for r in rows}
    returned = _texts(first)
    assert len(returned) == 2
    assert all(counts[t] >= 1 for t in returned)
    assert sum(counts.values()) == 4  # two searches, two results each
    assert counts["The weather in Lisbon was rainy all week."] == 0


def test_token_budget_cuts_the_results(
    inline_api: Any, query_api: TestClient, agent_id: str
) -> None:
    _ingest(inline_api, agent_id, WORK)
    everything = _search(query_api, agent_id=agent_id, query="Alice Google Lisbon Bob", top_k=10)
    budget = _search(
        query_api, agent_id=agent_id, query="Alice Google Lisbon Bob", top_k=10, max_tokens=12
    )
    assert 1 <= len(budget["results"]) < len(everything["results"])
    assert _texts(budget) == _texts(everything)[: len(budget["results"])]


@pytest.mark.parametrize(
    "body",
    [
        {"query": "x", "top_k": 0},
        {"query": "x", "top_k": 201},
        {"query": "x", "thinking_budget": 0},
        {"query": "x", "max_tokens": 0},
        {"query": "x" * 2001},
        {"query": ""},
        {"query": "x", "reranker": "bm25"},
        {"query": "x", "fact_type": ["facts"]},
        {"query": "x", "fact_type": []},
        {"query": "x", "unknown": 1},
        {"query": "x", "reference_time": "yesterday"},
    ],
)
def test_bad_searches_are_422_json(query_api: TestClient, body: dict[str, Any]) -> None:
    response = query_api.post("/api/search", json={"agent_id": "a", **body})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "validation_error"


def test_unavailable_cross_encoder_is_a_503(settings: Settings, pool: Any) -> None:
    from services.api.query_app import create_app

    broken = settings.model_copy(update={"cross_encoder_model": "/nonexistent/cross-encoder"})
    with TestClient(create_app(broken, pool=pool)) as client:
        response = client.post(
            "/api/search", json={"agent_id": "a", "query": "x", "reranker": "cross-encoder"}
        )
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "reranker_unavailable"
        assert "MEMORA_CROSS_ENCODER_MODEL" in error["message"]
        ok = client.post("/api/search", json={"agent_id": "a", "query": "x"})
        assert ok.status_code == 200  # the heuristic path is unaffected


def test_queries_are_embedded_on_int8_by_default_and_fp32_as_a_setting(
    inline_api: Any, query_api: TestClient, settings: Settings, pool: Any, agent_id: str
) -> None:
    """The query service embeds search queries on the int8 model (its check passes for this
    model), says so on /metrics, and finds what fp32 queries find; memories stay fp32."""
    from services.api.query_app import create_app

    _ingest(inline_api, agent_id, WORK)
    body = {"agent_id": agent_id, "query": "Where does Alice work?", "top_k": 4}
    assert query_api.app.state.embedder.query_precision == "int8"  # type: ignore[attr-defined]
    scrape = query_api.get("/metrics").text
    assert re.search(
        r'memora_query_embedding_precision\{model="[^"]+",precision="int8"\} 1\.0', scrape
    )
    int8 = _search(query_api, **body)["results"]
    changed = settings.model_copy(update={"query_embedding_int8": False})
    with TestClient(create_app(changed, pool=pool)) as client:
        assert client.app.state.embedder.query_precision == "fp32"  # type: ignore[attr-defined]
        fp32 = _search(client, **body)["results"]
    assert int8 and int8[0]["id"] == fp32[0]["id"]
    assert {r["id"] for r in int8} == {r["id"] for r in fp32}


def test_cross_encoder_runs_int8_on_a_cpu_by_default_and_fp32_as_torch(
    inline_api: Any, query_api: TestClient, settings: Settings, pool: Any, agent_id: str
) -> None:
    """`auto` on a CPU: ONNX Runtime int8 (its ranking check passes for this model), named in
    the trace and on /metrics; `onnx` (fp32) stays a setting and scores as torch does."""
    from services.api.query_app import create_app

    _ingest(inline_api, agent_id, WORK)
    body = {"agent_id": agent_id, "query": "Where does Alice work?", "trace": True, "top_k": 4}
    int8 = _search(query_api, **body, reranker="cross-encoder")
    assert query_api.app.state.retriever.cross_encoder().backend == "onnx-int8"  # type: ignore[attr-defined]
    assert int8["trace"]["reranker_backend"] == "onnx-int8"
    assert int8["trace"]["timings_ms"]["rerank"] > 0
    assert _search(query_api, **body)["trace"]["reranker_backend"] is None  # the heuristic
    scrape = query_api.get("/metrics").text
    assert re.search(
        r'memora_cross_encoder_backend\{backend="onnx-int8",model="[^"]+"\} 1\.0', scrape
    )
    by_backend = {"onnx-int8": int8}
    for backend in ("onnx", "torch"):
        changed = settings.model_copy(update={"cross_encoder_backend": backend})
        with TestClient(create_app(changed, pool=pool)) as client:
            by_backend[backend] = _search(client, **body, reranker="cross-encoder")
            assert by_backend[backend]["trace"]["reranker_backend"] == backend
    fp32, reference = by_backend["onnx"]["results"], by_backend["torch"]["results"]
    assert [r["id"] for r in fp32] == [r["id"] for r in reference]
    for mine, theirs in zip(fp32, reference, strict=True):
        assert abs(mine["weight"] - theirs["weight"]) < 1e-5
    weights = {r["id"]: r["weight"] for r in reference}  # int8: the same memories, close scores
    assert {r["id"] for r in int8["results"]} == set(weights)
    assert all(abs(r["weight"] - weights[r["id"]]) < 0.02 for r in int8["results"])
