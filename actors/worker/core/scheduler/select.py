"""The limit and max-score stages that end the chain (Nomad's select.go).

Walking every feasible node for every placement would be O(nodes) per placement; Nomad looks
at only `limit` scored options (log2 of the pool for services, two for batch: "power of two
choices") and keeps the best, the first of equal scores winning. Options scoring <= 0 are set
aside, up to MAX_SKIP, and used only if the walk runs out of nodes before the limit.

`GroupStack.select` applies these rules inside its walk over the ring (a stage object called
per node cost a fifth of the scheduler's time); this module holds the rules' parameters.
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
