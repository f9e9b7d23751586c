"""Score components for a feasible node (Nomad's rank.go and funcs.go).

Each component lands in [-1, 1]; the final score is the mean of the components that apply,
so a component that is absent does not dilute the others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from actors.worker.core.scheduler.constraints import check_constraint, resolve_node_target
from contracts import Affinity, Node

# ScoreFitBinPack ranges over [0, 18]; dividing by this normalises a perfect fit to 1.0.
BINPACK_MAX_FIT_SCORE = 18.0


def score_fit_binpack(
    capacity_cpu: float, capacity_mem: float, used_cpu: float, used_mem: float
) -> float:
    """Prefer fuller nodes: 20 - (10^freeCpu + 10^freeMem), clamped to [0, 18], normalised."""
    free_cpu = 1.0 - used_cpu / capacity_cpu if capacity_cpu > 0 else 0.0
    free_mem = 1.0 - used_mem / capacity_mem if capacity_mem > 0 else 0.0
    score = 20.0 - (math.pow(10.0, free_cpu) + math.pow(10.0, free_mem))
    if score > 18.0:
        score = 18.0
    elif score < 0.0:
        score = 0.0
    return score / BINPACK_MAX_FIT_SCORE


def score_fit_spread(
    capacity_cpu: float, capacity_mem: float, used_cpu: float, used_mem: float
) -> float:
    """The worst-fit variant (scheduler algorithm "spread"): prefer emptier nodes."""
    free_cpu = 1.0 - used_cpu / capacity_cpu if capacity_cpu > 0 else 0.0
    free_mem = 1.0 - used_mem / capacity_mem if capacity_mem > 0 else 0.0
    score = (math.pow(10.0, free_cpu) + math.pow(10.0, free_mem)) - 2.0
    if score > 18.0:
        score = 18.0
    elif score < 0.0:
        score = 0.0
    return score / BINPACK_MAX_FIT_SCORE


def job_anti_affinity(collisions: int, desired_count: int) -> float:
    """Penalty for stacking a group's allocations on one node: -(collisions+1)/count."""
    if collisions <= 0 or desired_count <= 0:
        return 0.0
    return -float(collisions + 1) / float(desired_count)


RESCHEDULE_PENALTY = -1.0


def node_affinity(affinities: Sequence[Affinity], node: Node) -> float:
    """Sum of matched weights over the sum of absolute weights, in [-1, 1]."""
    total = 0.0
    matched = 0.0
    for affinity in affinities:
        total += abs(affinity.weight)
        lval, lfound = resolve_node_target(affinity.l_target, node)
        rval, rfound = resolve_node_target(affinity.r_target, node)
        if check_constraint(affinity.operand, lval, rval, lfound, rfound):
            matched += affinity.weight
    return matched / total if total else 0.0
