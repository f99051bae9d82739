"""Length-bucketed, dynamically padded batches and the micro-batching queue."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memora.nlp.batching import MicroBatcher, length_batches, padded


def test_batches_group_similar_lengths_under_the_token_budget() -> None:
    lengths = [30, 5, 12, 6, 29, 11, 200]
    batches = length_batches(lengths, token_budget=60, max_size=8)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # each once
    assert [[lengths[i] for i in b] for b in batches] == [[5, 6, 11, 12], [29, 30], [200]]
    for b in batches[:-1]:  # padded size within budget; the 200-token pair is alone
        assert len(b) * max(lengths[i] for i in b) <= 60


def test_batches_respect_the_size_cap() -> None:
    batches = length_batches([10] * 7, token_budget=10_000, max_size=3)
    assert [len(b) for b in batches] == [3, 3, 1]
    assert length_batches([], 100, 4) == []


def test_padding_is_to_the_longest_row_of_the_batch() -> None:
    encoded = {
        "input_ids": [[101, 7, 102], [101, 8, 9, 10, 102], [101, 102]],
        "attention_mask": [[1, 1, 1], [1, 1, 1, 1, 1], [1, 1]],
    }
    out = padded(encoded, [2, 0], {"input_ids": 99})
    assert out["input_ids"].dtype == np.int64
    assert out["input_ids"].tolist() == [[101, 102, 99], [101, 7, 102]]
    assert out["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]


def test_concurrent_callers_share_calls_and_get_their_own_rows() -> None:
    calls: list[list[int]] = []
    running, release = threading.Event(), threading.Event()

    def run(items: list[int]) -> np.ndarray:
        calls.append(items)
        running.set()
        release.wait(5)  # holds the worker while the other callers queue up
        return np.array(items, dtype=np.float64) * 10

    batcher: MicroBatcher[int] = MicroBatcher(run, max_wait=0.05, max_items=1000)
    requests = [list(range(k * 100, k * 100 + k + 1)) for k in range(8)]
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(batcher.submit, requests[0])]
        assert running.wait(5)
        futures += [pool.submit(batcher.submit, r) for r in requests[1:]]
        while batcher._queue.qsize() < len(requests) - 1:
            time.sleep(0.005)
        release.set()
        answers = [f.result(timeout=10) for f in futures]
    for request, answer in zip(requests, answers, strict=True):
        assert answer.tolist() == [10.0 * i for i in request]
    # the first call ran alone; the seven callers that queued meanwhile shared the second
    assert batcher.calls == len(calls) == 2
    assert sorted(calls[1]) == sorted(i for r in requests[1:] for i in r)
    batcher.close()


def test_the_wait_for_company_is_bounded() -> None:
    batcher: MicroBatcher[int] = MicroBatcher(np.array, max_wait=0.05, max_items=100)
    started = time.perf_counter()
    assert batcher.submit([1, 2]).tolist() == [1, 2]
    assert time.perf_counter() - started < 1.0  # alone: answered after the bounded wait
    full: MicroBatcher[int] = MicroBatcher(np.array, max_wait=30.0, max_items=2)
    assert full.submit([1, 2]).tolist() == [1, 2]  # a full batch does not wait at all
    batcher.close()
    full.close()


def test_a_failed_call_fails_each_of_its_callers_and_the_worker_goes_on() -> None:
    def run(items: list[int]) -> np.ndarray:
        if -1 in items:
            raise ValueError("bad item")
        return np.array(items)

    batcher: MicroBatcher[int] = MicroBatcher(run, max_wait=0.0, max_items=10)
    with pytest.raises(ValueError, match="bad item"):
        batcher.submit([1, -1])
    assert batcher.submit([3, 4]).tolist() == [3, 4]
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit([1])
