"""The limit and max-score stages that end the chain (Nomad's select.go).

Walking every feasible node for every placement would be O(nodes) per placement; Nomad looks
at only `limit` scored options (log2 of the pool for services, two for batch: "power of two
choices") and keeps the best. Options scoring <= 0 are set aside, up to three, and used only
if the walk runs out of nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from contracts import Node
from contracts.resources import AllocatedDevice

SKIP_SCORE_THRESHOLD = 0.0
MAX_SKIP = 3
# node_limit_for_feasibility_checks: groups with affinities or spreads look at this many.
AFFINITY_SPREAD_LIMIT = 100
BATCH_LIMIT = 2


def service_limit(node_count: int) -> int:
    if node_count <= 1:
        return 2
    return max(2, math.ceil(math.log2(node_count)))


def placement_limit(batch: bool, node_count: int, count: int, has_affinity_or_spread: bool) -> int:
    limit = BATCH_LIMIT if batch else service_limit(node_count)
    if has_affinity_or_spread:
        limit = max(AFFINITY_SPREAD_LIMIT, count)
    return limit


@dataclass(slots=True)
class RankedOption:
    node: Node
    final_score: float
    cpu: int
    memory_mb: int
    disk_mb: int
    devices: tuple[AllocatedDevice, ...] = ()


class LimitedMax:
    """Collects up to `limit` scored candidates (setting aside up to MAX_SKIP low scorers) and
    keeps the best; the first one seen wins ties, as in Nomad's MaxScoreIterator. Candidates
    are (score, node, devices) so the hot loop allocates nothing for losers."""

    __slots__ = ("best", "best_score", "limit", "seen", "skipped")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen = 0
        self.best: tuple[Node, tuple[AllocatedDevice, ...]] | None = None
        self.best_score = 0.0
        self.skipped: list[tuple[float, Node, tuple[AllocatedDevice, ...]]] = []

    def offer(self, score: float, node: Node, devices: tuple[AllocatedDevice, ...]) -> bool:
        """Take a candidate; True once the limit is reached and the walk can stop."""
        if score <= SKIP_SCORE_THRESHOLD and len(self.skipped) < MAX_SKIP:
            self.skipped.append((score, node, devices))
            return False
        self.seen += 1
        if self.best is None or score > self.best_score:
            self.best = (node, devices)
            self.best_score = score
        return self.seen >= self.limit

    def result(self) -> tuple[float, Node, tuple[AllocatedDevice, ...]] | None:
        # Source exhausted before the limit: the skipped candidates are used after all.
        for score, node, devices in self.skipped:
            if self.seen >= self.limit:
                break
            self.seen += 1
            if self.best is None or score > self.best_score:
                self.best = (node, devices)
                self.best_score = score
        if self.best is None:
            return None
        return self.best_score, self.best[0], self.best[1]
