"""Preemption (Nomad's scheduler/feasible/preemption.go and the BinPack iterator's evict mode).

When a placement fits nowhere and preemption is on for the job's scheduler type (the
scheduler configuration; by default only for system jobs), a node where evicting allocations
of lower-priority jobs makes room is chosen:

- only allocations of jobs at least PRIORITY_DELTA below the job's priority are candidates
  (never the job's own, never one this plan placed or already stops);
- on a node, candidates are taken lowest priority first; within a priority, the one closest
  in shape to what is still missing (Nomad's basicResourceDistance) first; then victims that
  turned out not to be needed are dropped again, largest first kept (filterSuperset);
- among nodes, the one whose victims have the lowest top priority wins, then fewer victims,
  then less evicted (Nomad scores nodes by the preempted allocations' priorities).

Work is bounded: at most MAX_NODES feasible nodes are examined per placement, and on each
at most MAX_CANDIDATES allocations (the lowest priorities, largest first) are considered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from contracts import Allocation

PRIORITY_DELTA = 10
MAX_NODES = 100
MAX_CANDIDATES = 100


@dataclass(frozen=True, slots=True)
class Candidate:
    alloc: Allocation
    priority: int

    @property
    def size(self) -> tuple[int, int, int]:
        res = self.alloc.allocated_resources
        return res.cpu, res.memory_mb, res.disk_mb


@dataclass(frozen=True, slots=True)
class Eviction:
    """Victims on one node, and how bad evicting them is (lower is better)."""

    node_id: str
    victims: tuple[Allocation, ...]
    cost: tuple[int, int, int]


def _met(missing: Sequence[int]) -> bool:
    return all(m <= 0 for m in missing)


def _distance(candidate: Candidate, missing: Sequence[int]) -> float:
    """How far an allocation's resources are from what is still missing, per dimension
    relative to the need (dimensions no longer missing do not count)."""
    total = 0.0
    for have, want in zip(candidate.size, missing, strict=True):
        if want > 0:
            total += ((want - have) / want) ** 2
    return math.sqrt(total)


def choose_victims(
    missing: tuple[int, int, int], candidates: Iterable[Candidate]
) -> tuple[Allocation, ...] | None:
    """The allocations to evict so that `missing` (cpu, memory, disk still needed on the
    node) is freed; () if nothing is missing, None if the candidates cannot free it."""
    if _met(missing):
        return ()
    considered = sorted(candidates, key=lambda c: (c.priority, [-s for s in c.size], c.alloc.id))
    by_priority: dict[int, list[Candidate]] = {}
    for candidate in considered[:MAX_CANDIDATES]:
        by_priority.setdefault(candidate.priority, []).append(candidate)
    remaining = list(missing)
    chosen: list[Candidate] = []
    for priority in sorted(by_priority):
        pool = by_priority[priority]
        while pool and not _met(remaining):
            best = min(pool, key=lambda c: (_distance(c, remaining), c.alloc.id))
            pool.remove(best)
            chosen.append(best)
            remaining = [r - s for r, s in zip(remaining, best.size, strict=True)]
        if _met(remaining):
            break
    if not _met(remaining):
        return None
    # Drop victims that were not needed after all: keep the largest until the need is met.
    chosen.sort(key=lambda c: (c.size, c.alloc.id), reverse=True)
    remaining = list(missing)
    kept: list[Allocation] = []
    for candidate in chosen:
        if _met(remaining):
            break
        kept.append(candidate.alloc)
        remaining = [r - s for r, s in zip(remaining, candidate.size, strict=True)]
    return tuple(kept)


def eviction_on(
    node_id: str,
    missing: tuple[int, int, int],
    candidates: Sequence[Candidate],
) -> Eviction | None:
    victims = choose_victims(missing, candidates)
    if not victims:
        return None
    priority = {c.alloc.id: c.priority for c in candidates}
    top = max(priority[v.id] for v in victims)
    evicted = sum(v.allocated_resources.cpu + v.allocated_resources.memory_mb for v in victims)
    return Eviction(node_id, victims, (top, len(victims), evicted))


def best_eviction(
    nodes: Iterable[str],
    missing_on: Callable[[str], tuple[int, int, int] | None],
    candidates_on: Callable[[str], Sequence[Candidate]],
) -> Eviction | None:
    """The cheapest eviction over at most MAX_NODES of `nodes` (None: no node has one).
    `missing_on` gives what a node lacks for the ask (None: the node cannot take it even
    empty, e.g. smaller than the ask)."""
    best: Eviction | None = None
    for examined, node_id in enumerate(nodes):
        if examined >= MAX_NODES:
            break
        missing = missing_on(node_id)
        if missing is None:
            continue
        eviction = eviction_on(node_id, missing, candidates_on(node_id))
        if eviction is not None and (best is None or eviction.cost < best.cost):
            best = eviction
    return best
