"""The retrievers' protocol (`memora.retrieval.arms`): the registry, and what a search shares
with its arms — one forward pass for the query and the arms' own texts, in the registry's
order, and no arm left waiting when another or the search itself fails."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from uuid import UUID

import numpy as np
import pytest

from memora.retrieval.arms import ARM_TYPES, ARMS, Arm, Search
from memora.retrieval.retriever import _run
from memora.retrieval.types import ArmResult, SearchParams, SearchScope


def _search(query: str = "what did Bob say in March?") -> Search:
    p = SearchParams("agent", query)
    return Search(p, SearchScope.of(p), datetime(2024, 5, 1, tzinfo=UTC), per_arm=50, budget=100)


class _Gives(Arm):
    """An arm that ranks by a text of its own, or fails before giving it."""

    embeds_own = True

    def __init__(self, name: str, text: str | None, fails: bool = False) -> None:
        self.name = name  # type: ignore[misc]
        self.text, self.fails = text, fails

    def retrieve(self, search: Search) -> ArmResult:
        if self.fails:
            raise RuntimeError("lookup failed")
        search.give_text(self.name, self.text)
        vector = search.vector(self.name)
        return ArmResult(self.name, [] if vector is None else [(UUID(int=1), 1.0)])


def test_the_registry_names_every_retriever_once_in_fusions_order() -> None:
    assert ARMS == ("semantic", "keyword", "graph", "temporal", "entity", "history")
    assert all(issubclass(t, Arm) for t in ARM_TYPES)
    embeds_own = {t.name for t in ARM_TYPES if t.embeds_own}
    assert embeds_own == {"temporal", "entity"}
    assert [t.name for t in ARM_TYPES if not t.listed_when_skipped] == ["history"]


def test_the_arms_texts_are_embedded_with_the_query_in_the_registrys_order() -> None:
    search = _search()
    search.await_texts(["temporal", "entity"])
    with ThreadPoolExecutor(2) as pool:
        # given out of order, one of them None: the query, then the others in `order`
        search.give_text("entity", "what did say in March?")
        done = pool.submit(search.texts, ["semantic", "temporal", "entity"])
        with pytest.raises(FutureTimeout):  # still waiting for temporal's
            done.result(timeout=0.05)
        search.give_text("temporal", None)
        texts = done.result(timeout=5)
    assert list(texts.items()) == [
        ("query", "what did Bob say in March?"),
        ("entity", "what did say in March?"),
    ]
    vectors = np.eye(2, dtype=np.float32)
    search.embedded(dict(zip(texts, vectors, strict=True)))
    assert np.array_equal(search.query_vector(), vectors[0])
    assert np.array_equal(search.vector("entity"), vectors[1])
    assert search.vector("temporal") is None


def test_an_arm_that_fails_before_giving_its_text_does_not_hold_the_search() -> None:
    search = _search()
    failing = _Gives("entity", "x", fails=True)
    search.await_texts([failing.name])
    with ThreadPoolExecutor(2) as pool:
        ran = pool.submit(_run, failing, search)
        texts = pool.submit(search.texts, ["entity"])
        try:
            assert texts.result(timeout=5) == {"query": search.query}  # None was given
        finally:
            search.give_text("entity", None)  # a broken `_run` fails the test, not the suite
        with pytest.raises(RuntimeError, match="lookup failed"):
            ran.result(timeout=5)


def test_a_search_that_fails_before_embedding_fails_its_waiting_arms() -> None:
    search = _search()
    waiting = threading.Event()

    def wait_for_vector() -> np.ndarray:
        waiting.set()
        return search.query_vector()

    with ThreadPoolExecutor(2) as pool:
        vector = pool.submit(wait_for_vector)
        time_range = pool.submit(lambda: search.time_range)
        waiting.wait(5)
        search.abandon(ValueError("the embedder is down"))
        with pytest.raises(ValueError, match="embedder is down"):
            vector.result(timeout=5)
        with pytest.raises(ValueError, match="embedder is down"):
            time_range.result(timeout=5)


def test_the_dated_retrievers_skip_a_search_that_states_no_time() -> None:
    from memora.basics.config import Settings
    from memora.retrieval.arms import ArmContext
    from memora.retrieval.arms.history import HistoryArm
    from memora.retrieval.arms.temporal import TemporalArm

    context = ArmContext(Settings(), pool=None, caches=None)  # type: ignore[arg-type]
    search = _search("hello")
    search.dated(None, None)
    assert TemporalArm.dated and HistoryArm.dated  # decided once the time range is parsed
    assert TemporalArm(context).skip(search) == "no time constraint in the query"
    assert HistoryArm(context).skip(search) == "no validity window"
