"""recall (seed 002 §4.4.3): the fused read path, reranked by §4.6's score.

The candidates are those of a search (semantic, keyword, graph and temporal retrievers fused by
RRF), filtered by category and by when they were said, then scored
relevance·0.4 + recency·0.2 + importance·0.3 + frequency·0.1 (weights are settings) instead of
by the heuristic or the cross-encoder. Returned memories count as accessed (their last access
and access count are updated by the search's access recorder, flushed here before returning).
"""

from __future__ import annotations

from typing import Any

from memora.basics.errors import Invalid
from memora.basics.models import FACT_TYPES
from memora.basics.tenancy import Scope
from memora.lifecycle.recall import REFLECTION, RecallQuery
from memora.pipeline.context import AppContext
from memora.retrieval import Retriever, SearchParams
from memora.store import lifecycle as store


def recall(
    app: AppContext, retriever: Retriever, scope: Scope, agent_id: str, q: RecallQuery
) -> list[dict[str, Any]]:
    """The agent's memories for `q`, best first, each with its lifecycle state; `retriever`:
    the query service's read path."""
    if q.start is not None and q.end is not None and q.start >= q.end:
        raise Invalid("bad_time_range", "time_range.start must be before time_range.end")
    fact_types = (*FACT_TYPES, REFLECTION) if q.include_reflections else FACT_TYPES
    outcome = retriever.search(
        SearchParams(
            agent_id=agent_id,
            query=q.query,
            fact_types=fact_types,
            top_k=q.limit,
            reranker="recall",
            scope=scope,
            categories=q.categories,
            said_between=(q.start, q.end) if q.start or q.end else None,
            as_of=q.as_of,
        )
    )
    retriever.access.flush()
    with app.pool.connection() as conn:
        rows = {
            r.id: r
            for r in store.get_units(conn, scope.key(agent_id), [h.id for h in outcome.hits])
        }
    return [
        {
            "id": h.id,
            "text": h.text,
            "score": h.weight,
            "fact_type": h.fact_type,
            "category": rows[h.id].category,
            "importance": rows[h.id].importance,
            "access_count": rows[h.id].access_count,
            "last_accessed_at": rows[h.id].last_accessed_at,
            "event_date": h.event_date,
            "metadata": h.metadata,
        }
        for h in outcome.hits
        if h.id in rows
    ]
