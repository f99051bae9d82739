"""Searches at once on a pool smaller than `search_concurrency` asks for: the retriever runs as
many as the pool serves, so no retriever holding a connection waits on one that waits for a
connection (which would answer only at the pool's timeout, as a 503)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memora.basics.config import Settings

pytestmark = pytest.mark.integration

FACTS = [
    "Alice works at Google as a software engineer.",
    "Alice says remote work lets her focus on deep work.",
    "Bob moved to Lisbon and started surfing with Alice.",
    "Alice adopted a cat named Miso in March.",
]


def test_more_searches_than_the_pool_serves_all_answer(
    settings: Settings, pg_url: str, inline_api: Any, agent_id: str
) -> None:
    from memora.db.pool import make_pool
    from memora.nlp.embedding import get_embedder
    from memora.retrieval import Retriever
    from memora.retrieval.retriever import searches_at_once
    from memora.retrieval.types import SearchParams

    items = [{"content": text} for text in FACTS]
    response = inline_api.post("/api/memories/batch", json={"agent_id": agent_id, "items": items})
    assert response.status_code == 200, response.json()
    small = make_pool(pg_url, min_size=1, max_size=8, name="small", timeout=3.0)
    retriever = Retriever(settings, small, get_embedder(settings.embedding_model))
    assert searches_at_once(settings, small) < settings.search_concurrency
    # Names in the query: the entity retriever reads them before the query is embedded, while
    # the semantic retriever holds its connection, the graph retriever one to wait on it and,
    # under a filter (one network, as `think` searches), the keyword retriever one too.
    queries = [f"What did Alice and Bob do together? ({n})" for n in range(12)]

    def search(query: str) -> Any:
        return retriever.search(SearchParams(agent_id, query, fact_types=("world",)))

    try:
        with ThreadPoolExecutor(len(queries)) as threads:
            outcomes = list(threads.map(search, queries))
        assert all(outcome.hits for outcome in outcomes)
    finally:
        retriever.close()
        small.close()
