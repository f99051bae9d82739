"""Spreading activation over the memory graph (seed 000 §3.1.3), independent of storage.

Entry points start with activation 1.0. The most active unexplored nodes (a heap with lazy
deletion) are expanded a wave at a time (one database round trip per wave, not per node; a
wave is a quarter of the budget):
each neighbour receives activation · link weight · type weight · decay, keeping the highest
value it was offered and never exceeding its source's activation. Exploration stops after
`budget` nodes (the search's thinking_budget) or when nothing above `min_activation` is left;
the explored nodes come back ranked by activation.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from memora.config import Settings

N = TypeVar("N", bound=Hashable)

DEFAULT_TYPE_WEIGHTS: Mapping[str, float] = {
    "entity": 1.0,
    "semantic": 1.0,
    "temporal": 1.0,
    # causal links are boosted (seed 004: 2x in retrieval)
    "causes": 2.0,
    "caused_by": 2.0,
    "enables": 2.0,
    "prevents": 2.0,
    # the lifecycle's links (memora.lifecycle): typed by a person or an agent (link), and
    # between a reflection and the memories it rests on
    "explicit": 1.5,
    "reflection": 1.0,
}


# (target, link type, weight): plain tuples, since graph retrieval builds thousands per search
Edge = tuple[N, str, float]
Neighbours = Callable[[list[N]], Mapping[N, Sequence[Edge[N]]]]


@dataclass(frozen=True)
class SpreadSettings:
    decay: float = 0.8
    type_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TYPE_WEIGHTS))
    wave: int = 0  # nodes expanded per round trip; 0: a quarter of the budget, at least 10
    min_activation: float = 0.05

    @classmethod
    def from_settings(cls, s: Settings) -> SpreadSettings:
        """Settings' link weights override the defaults type by type."""
        return cls(
            decay=s.graph_decay, type_weights={**DEFAULT_TYPE_WEIGHTS, **s.graph_link_weights}
        )


def spread_activation(
    entry: Mapping[N, float], neighbours: Neighbours[N], budget: int, s: SpreadSettings
) -> list[tuple[N, float]]:
    """Explored nodes with their final activation, most active first. Nodes are any hashable
    ids; the caller's choice matters for speed (str hashes are cached, UUID's are not)."""
    pending: dict[N, float] = {}  # activated, not explored yet
    explored: dict[N, float] = {}
    heap: list[tuple[float, int, N]] = []  # (-activation, arrival, node); stale entries skipped
    arrivals = itertools.count()

    def offer(node: N, value: float) -> None:
        pending[node] = value
        heapq.heappush(heap, (-value, next(arrivals), node))

    for node, value in entry.items():
        offer(node, value)
    wave = s.wave or max(10, -(-budget // 4))
    weights, decay, floor = s.type_weights, s.decay, s.min_activation
    while len(explored) < budget:
        frontier: list[N] = []
        size = min(wave, budget - len(explored))
        while heap and len(frontier) < size:
            negative, _, node = heapq.heappop(heap)
            if -negative < floor:
                heap.clear()  # the rest is weaker still
            elif pending.get(node) == -negative:  # else stale: explored, or offered more since
                frontier.append(node)
        if not frontier:
            break
        edges = neighbours(frontier)
        for node in frontier:
            source = explored[node] = pending.pop(node)
            for target, link_type, weight in edges.get(node, ()):
                if target in explored:
                    continue
                offered = min(source * weight * weights.get(link_type, 1.0) * decay, source)
                if offered > pending.get(target, 0.0):
                    offer(target, offered)
    return sorted(explored.items(), key=lambda kv: -kv[1])
