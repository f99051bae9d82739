"""Spreading activation over the memory graph (seed 000 §3.1.3), independent of storage.

Entry points start with activation 1.0. The most active unexplored nodes are expanded a wave
at a time (one database round trip per wave, not per node; a wave is a quarter of the budget):
each neighbour receives activation · link weight · type weight · decay, keeping the highest
value it was offered and never exceeding its source's activation. Exploration stops after
`budget` nodes (the search's thinking_budget) or when nothing above `min_activation` is left;
the explored nodes come back ranked by activation.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

DEFAULT_TYPE_WEIGHTS: Mapping[str, float] = {
    "entity": 1.0,
    "semantic": 1.0,
    "temporal": 1.0,
    # causal links are boosted (seed 004: 2x in retrieval)
    "causes": 2.0,
    "caused_by": 2.0,
    "enables": 2.0,
    "prevents": 2.0,
}


class Edge(NamedTuple):  # a tuple: hundreds are built per search, a dataclass costs 5x more
    target: UUID
    link_type: str
    weight: float


Neighbours = Callable[[list[UUID]], Mapping[UUID, Sequence[Edge]]]


@dataclass(frozen=True)
class SpreadSettings:
    decay: float = 0.8
    type_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TYPE_WEIGHTS))
    wave: int = 0  # nodes expanded per round trip; 0: a quarter of the budget, at least 10
    min_activation: float = 0.05


def spread_activation(
    entry: Mapping[UUID, float], neighbours: Neighbours, budget: int, s: SpreadSettings
) -> list[tuple[UUID, float]]:
    """Explored nodes with their final activation, most active first."""
    activation: dict[UUID, float] = dict(entry)
    explored: dict[UUID, float] = {}
    wave = s.wave or max(10, -(-budget // 4))
    while len(explored) < budget:
        frontier = heapq.nlargest(
            min(wave, budget - len(explored)),
            (n for n, a in activation.items() if n not in explored and a >= s.min_activation),
            key=activation.__getitem__,
        )
        if not frontier:
            break
        edges = neighbours(frontier)
        for node in frontier:
            source = activation[node]
            explored[node] = source
            for edge in edges.get(node, ()):
                if edge.target in explored:
                    continue
                offered = source * edge.weight * s.type_weights.get(edge.link_type, 1.0) * s.decay
                offered = min(offered, source)
                if offered > activation.get(edge.target, 0.0):
                    activation[edge.target] = offered
    return sorted(explored.items(), key=lambda kv: -kv[1])
