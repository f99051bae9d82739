"""Batching for the models of the read path.

- `MicroBatcher`: one worker thread owns the model; concurrent callers queue their items, and
  whatever arrives within a small bounded wait of the first is run in the same call, so
  concurrent searches share forward passes. Each caller gets exactly its own rows back.
- `length_batches` and `padded`: sequences sorted by length and cut into batches under a
  token budget, each padded only to its own longest member (dynamic padding).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass
class _Request(Generic[T]):
    items: list[T]
    result: Future[np.ndarray] = field(default_factory=Future)


class MicroBatcher(Generic[T]):
    """`run(items)` returns an array whose first axis follows `items`; `submit` hands it the
    items of every request queued within `max_wait` seconds of the first (while fewer than
    `max_items`) and returns the caller's rows."""

    def __init__(
        self,
        run: Callable[[list[T]], np.ndarray],
        *,
        max_wait: float,
        max_items: int,
        name: str = "memora-batcher",
    ) -> None:
        self._run, self.max_wait, self.max_items = run, max_wait, max_items
        self._queue: queue.SimpleQueue[_Request[T] | None] = queue.SimpleQueue()
        self.calls = 0  # calls of `run` so far
        self._closed = False
        self._worker = threading.Thread(target=self._serve, name=name, daemon=True)
        self._worker.start()

    def submit(self, items: Sequence[T]) -> np.ndarray:
        if self._closed:
            raise RuntimeError("the batcher is closed")
        request: _Request[T] = _Request(list(items))
        self._queue.put(request)
        return request.result.result()

    def close(self) -> None:
        """Runs what is queued, then stops the worker."""
        self._closed = True
        self._queue.put(None)
        self._worker.join()

    def _serve(self) -> None:
        while (first := self._queue.get()) is not None:
            requests, count, stop = [first], len(first.items), False
            deadline = time.monotonic() + self.max_wait
            while count < self.max_items:
                try:
                    nxt = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                requests.append(nxt)
                count += len(nxt.items)
            self._answer(requests)
            if stop:
                return

    def _answer(self, requests: list[_Request[T]]) -> None:
        try:
            rows = self._run([item for r in requests for item in r.items])
        except BaseException as exc:  # each caller sees the failure of the shared call
            for r in requests:
                r.result.set_exception(exc)
            return
        finally:
            self.calls += 1
        start = 0
        for r in requests:
            r.result.set_result(rows[start : start + len(r.items)])
            start += len(r.items)


def length_batches(lengths: Sequence[int], token_budget: int, max_size: int) -> list[list[int]]:
    """Indices of `lengths` sorted by length and cut into batches of at most `max_size` whose
    padded size (members × longest member) stays within `token_budget`; a sequence longer
    than the budget makes a batch of its own."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        # sorted ascending: the newcomer is the batch's longest member
        if current and (len(current) == max_size or (len(current) + 1) * lengths[i] > token_budget):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def padded(
    encoded: Mapping[str, Sequence[Sequence[int]]],
    rows: Sequence[int],
    pad_values: Mapping[str, int],
) -> dict[str, np.ndarray]:
    """The tokenizer's outputs (`input_ids`, `attention_mask`, …) for `rows`, right-padded to
    the longest of them, as int64 arrays; `pad_values` gives each input's padding value
    (unnamed ones pad with 0)."""
    width = max(len(encoded["input_ids"][r]) for r in rows)
    out: dict[str, np.ndarray] = {}
    for name, sequences in encoded.items():
        array = np.full((len(rows), width), pad_values.get(name, 0), dtype=np.int64)
        for k, r in enumerate(rows):
            array[k, : len(sequences[r])] = sequences[r]
        out[name] = array
    return out
