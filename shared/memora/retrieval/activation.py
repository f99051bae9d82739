"""Spreading activation over the memory graph (seed 000 §3.1.3), independent of storage.

Entry points start with activation 1.0. The most active unexplored nodes (a heap with lazy
deletion) are expanded a wave at a time (one database round trip per wave, not per node; a
wave is a quarter of the budget):
each neighbour receives activation · link weight · type weight · decay, keeping the highest
value it was offered and never exceeding its source's activation. Exploration stops after
`budget` nodes (the search's thinking_budget) or when nothing above `min_activation` is left;
the explored nodes come back ranked by activation.

`admit` keeps the walk to the nodes a search's filters let through when the caller cannot
tell them in advance, checking only the nodes that come up for exploration: each source
offers its activation along its first `fanout` links to nodes not known to fail; the most
active pending nodes are checked (in one call) before they form a wave, and a node that
fails gives each source that offered to it that source's next link instead. With one link
type this explores what a walk over the filtered graph explores (each source's strongest
`fanout` links to passing nodes); a boosted type (causal ×2, explicit ×1.5) behind a failing
link is offered only once that link's node comes up.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from memora.basics.config import Settings

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


Admit = Callable[[list[N]], set[N]]


def spread_activation(
    entry: Mapping[N, float],
    neighbours: Neighbours[N],
    budget: int,
    s: SpreadSettings,
    admit: Admit[N] | None = None,
    fanout: int = 0,
) -> list[tuple[N, float]]:
    """Explored nodes with their final activation, most active first. Nodes are any hashable
    ids; the caller's choice matters for speed (str hashes are cached, UUID's are not).
    Without `admit` every link `neighbours` gives is followed; with it (which of the nodes
    given pass: see the module's doc) each source's first `fanout` to nodes not rejected,
    `neighbours` giving more, strongest first. Entry points are taken as admitted."""
    walk = _Walk(entry, s)
    explored = walk.explored
    wave = s.wave or max(10, -(-budget // 4))
    while len(explored) < budget:
        frontier = walk.choose(min(wave, budget - len(explored)), admit)
        if not frontier:
            break
        walk.expand(frontier, neighbours(frontier), fanout, admit is not None)
    return sorted(explored.items(), key=lambda kv: -kv[1])


class _Walk(Generic[N]):
    """One spread's state: the activated nodes not explored yet (`pending`) and the explored
    ones, a heap of the pending by activation (lazy deletion: stale entries skipped), and for
    the checked walk each explored node's links with the next one to follow, the nodes checked
    and those waiting for a check with the sources that offered to them."""

    def __init__(self, entry: Mapping[N, float], s: SpreadSettings) -> None:
        self.pending: dict[N, float] = {}
        self.explored: dict[N, float] = {}
        self.heap: list[tuple[float, int, N]] = []  # (-activation, arrival, node)
        self.arrivals = itertools.count()
        self.weights, self.decay, self.floor = s.type_weights, s.decay, s.min_activation
        self.links: dict[N, tuple[Sequence[Edge[N]], int]] = {}  # explored: its links, the next
        self.admitted, self.rejected = set(entry), set[N]()
        # a node not checked yet: the sources it holds a link of
        self.holders: dict[N, list[N]] = {}
        for node, value in entry.items():
            self.offer(node, value)

    def offer(self, node: N, value: float) -> None:
        self.pending[node] = value
        heapq.heappush(self.heap, (-value, next(self.arrivals), node))

    def choose(self, size: int, admit: Admit[N] | None) -> list[N]:
        """The next wave: the `size` most active pending nodes, those not admitted yet checked
        first (`admit`), and chosen again while a check rejected some (a rejection may have
        offered more)."""
        chosen = self.pop(size)
        unknown = [e[2] for e in chosen if e[2] not in self.admitted] if admit is not None else []
        while unknown and admit is not None:
            self.check(unknown, admit)
            for item in chosen:  # back in their places (ties keep their arrival order)
                if item[2] not in self.rejected:
                    heapq.heappush(self.heap, item)
            chosen = self.pop(size)
            unknown = [e[2] for e in chosen if e[2] not in self.admitted]
        return [node for _, _, node in chosen]

    def expand(
        self, frontier: list[N], edges: Mapping[N, Sequence[Edge[N]]], fanout: int, checked: bool
    ) -> None:
        """The wave explored: each node's activation offered along its links (`checked`: its
        first `fanout` to nodes not rejected, else all of them)."""
        for node in frontier:
            self.explored[node] = self.pending.pop(node)
            if not checked:
                self.follow_all(node, edges.get(node, ()))
                continue
            self.links[node] = (edges.get(node, ()), 0)
            self.follow(node, fanout)

    def follow(self, source: N, count: int) -> None:
        """Offer the source's activation along its next `count` links to nodes not rejected
        (a link to an explored node counts, as it would have been followed)."""
        edges, i = self.links[source]
        value = self.explored[source]
        rejected, explored, admitted = self.rejected, self.explored, self.admitted
        weights, decay, pending = self.weights, self.decay, self.pending
        while count > 0 and i < len(edges):
            target, link_type, weight = edges[i]
            i += 1
            if target in rejected:
                continue
            count -= 1
            if target in explored:
                continue
            if target not in admitted:  # only the checked walk comes here
                self.holders.setdefault(target, []).append(source)
            offered = min(value * weight * weights.get(link_type, 1.0) * decay, value)
            if offered > pending.get(target, 0.0):
                self.offer(target, offered)
        self.links[source] = (edges, i)

    def follow_all(self, source: N, edges: Sequence[Edge[N]]) -> None:
        """`follow` of every link, with nothing to check (no `admit`): the loop of unfiltered
        searches, the most offers of any, with its lookups bound once and no call per offer."""
        explored, pending, heap, decay = self.explored, self.pending, self.heap, self.decay
        value = explored[source]
        get_pending, get_weight, push, arrival = (
            pending.get,
            self.weights.get,
            heapq.heappush,
            self.arrivals,
        )
        for target, link_type, weight in edges:
            if target in explored:
                continue
            offered = value * weight * get_weight(link_type, 1.0) * decay
            if offered > value:
                offered = value
            if offered > get_pending(target, 0.0):
                pending[target] = offered
                push(heap, (-offered, next(arrival), target))

    def pop(self, count: int) -> list[tuple[float, int, N]]:
        """The heap entries of the `count` most active pending nodes, off the heap."""
        heap, pending, floor = self.heap, self.pending, self.floor
        out: list[tuple[float, int, N]] = []
        while heap and len(out) < count:
            top = heapq.heappop(heap)
            if -top[0] < floor:
                heap.clear()  # the rest is weaker still
            elif pending.get(top[2]) == -top[0]:  # else stale
                out.append(top)
        return out

    def check(self, nodes: list[N], admit: Admit[N]) -> None:
        passing = admit(nodes)
        self.admitted.update(passing)
        for node in nodes:
            sources = self.holders.pop(node, [])
            if node not in passing:
                self.rejected.add(node)
                del self.pending[node]
                for source in sources:
                    self.follow(source, 1)  # its next link instead
