"""Where LoCoMo evidence is lost on the read path, read from the search trace.

For every evidence turn of every question: its rank in each retriever's list (or absent), its
rank after fusion (in the reranked shortlist or not), after the reranker and after MMR. An
evidence turn missing from the top k is charged to the first stage that left it out of the
top k: `retrieval` (no retriever found it), `fusion` (found, but RRF left it outside the
shortlist), `rerank` (in the shortlist, ranked below k by the reranker) or `mmr` (in the
reranker's top k, pushed out by diversification). Used by `bench/locomo.py --analyse`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from memora.retrieval.arms import ARMS

STAGES = ("retrieval", "fusion", "rerank", "mmr")


@dataclass
class EvidenceFate:
    category: str
    arm_ranks: dict[str, int]  # 1-based rank in each retriever that found it
    fused: int | None  # rank in the RRF shortlist (None: outside it)
    reranked: int | None  # rank by the reranker's score within the shortlist
    final: int | None  # position in the results (None: not returned)

    def lost_at(self, k: int) -> str | None:
        """The stage that left it out of the top k, or None when it is in the top k."""
        if self.final is not None and self.final <= k:
            return None
        if not self.arm_ranks:
            return "retrieval"
        if self.fused is None:
            return "fusion"
        if self.reranked is None or self.reranked > k:
            return "rerank"
        return "mmr"


def fates(trace: dict[str, Any], dia_of: dict[str, str], evidence: set[str],
          category: str) -> list[EvidenceFate]:  # fmt: skip
    """One EvidenceFate per evidence turn, from one search's trace (`dia_of`: unit id →
    dia_id of the conversation's units)."""
    ranks: dict[str, dict[str, int]] = defaultdict(dict)
    for arm, path in trace["paths"].items():
        for rank, row in enumerate(path["results"], 1):
            ranks[dia_of.get(row["id"], "")][arm] = rank
    shortlist = [dia_of.get(c["id"], "") for c in trace["candidates"]]
    by_score = sorted(trace["candidates"], key=lambda c: -c["score"])
    reranked = [dia_of.get(c["id"], "") for c in by_score]
    final = [dia_of.get(i, "") for i in trace["selected"]]

    def position(order: list[str], dia: str) -> int | None:
        return order.index(dia) + 1 if dia in order else None

    return [
        EvidenceFate(
            category,
            ranks.get(d, {}),
            position(shortlist, d),
            position(reranked, d),
            position(final, d),
        )
        for d in sorted(evidence)
    ]


@dataclass
class Summary:
    evidence: int = 0
    lost: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    found_by: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ARMS, 0))
    top10_in: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ARMS, 0))
    only_by: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ARMS, 0))
    arm_ranks: dict[str, list[int]] = field(default_factory=lambda: {a: [] for a in ARMS})
    shortlisted: int = 0


def summarise(all_fates: list[EvidenceFate], k: int = 10) -> dict[str, Summary]:
    out: dict[str, Summary] = defaultdict(Summary)
    for f in all_fates:
        for name in ("all", f.category):
            s = out[name]
            s.evidence += 1
            s.shortlisted += f.fused is not None
            stage = f.lost_at(k)
            if stage is not None:
                s.lost[stage] += 1
            for arm, rank in f.arm_ranks.items():
                s.found_by[arm] += 1
                s.top10_in[arm] += rank <= 10
                s.arm_ranks[arm].append(rank)
            if len(f.arm_ranks) == 1:
                s.only_by[next(iter(f.arm_ranks))] += 1
    return dict(out)


def report(summaries: dict[str, Summary], k: int = 10) -> str:
    lines = [
        f"| category | evidence | in top {k} | lost: " + " / ".join(STAGES)
        + " | shortlisted | found by (top 10; median rank; only by) "
        + " / ".join(ARMS) + " |",
        "|---" * 6 + "|",
    ]  # fmt: skip
    for name, s in summaries.items():
        kept = s.evidence - sum(s.lost.values())
        arms = " / ".join(
            f"{s.found_by[a]} ({s.top10_in[a]}; "
            f"{statistics.median(s.arm_ranks[a]) if s.arm_ranks[a] else '-'}; {s.only_by[a]})"
            for a in ARMS
        )
        lost = " / ".join(str(s.lost[st]) for st in STAGES)
        lines.append(f"| {name} | {s.evidence} | {kept} | {lost} | {s.shortlisted} | {arms} |")
    return "\n".join(lines)
