"""Which instances a fleet's scale-in removes: Nomad Autoscaler's node selector strategies
(sdk/helper/scaleutils/nodeselector).

    least_busy            the instances with the least allocated, CPU and memory percent
                          summed (Nomad's default)
    empty                 only instances without allocations; fewer than asked when there
                          are not enough (Nomad never drains a busy node under this strategy)
    empty_ignore_system   the same, not counting system jobs' allocations
    newest_create_index   the most recently registered first
    oldest_create_index   the earliest registered first

Candidates are the fleet's ready instances (up, eligible, not draining): one already on its
way out is not picked twice. Ties break by name, so a selection is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.autoscaler.core.cluster_signals import Instance
from contracts.autoscaling.policy import DEFAULT_NODE_SELECTOR, NODE_SELECTORS


def busy_percent(instance: Instance) -> float:
    cpu = 100.0 * instance.load.cpu / instance.cpu if instance.cpu > 0 else 0.0
    memory = 100.0 * instance.load.memory_mb / instance.memory_mb if instance.memory_mb else 0.0
    return cpu + memory


def select_for_removal(
    instances: Sequence[Instance], count: int, strategy: str = DEFAULT_NODE_SELECTOR
) -> list[Instance]:
    """Up to `count` of the ready `instances` to drain and remove, by `strategy`."""
    if strategy not in NODE_SELECTORS:
        raise ValueError(f'unknown node_selector_strategy "{strategy}"')
    if count <= 0:
        return []
    ready = sorted((i for i in instances if i.ready), key=lambda i: i.name)
    if strategy == "least_busy":
        ready.sort(key=busy_percent)
    elif strategy == "empty":
        ready = [i for i in ready if i.load.allocs == 0]
    elif strategy == "empty_ignore_system":
        ready = [i for i in ready if i.load.allocs == i.load.system_allocs]
    elif strategy == "newest_create_index":
        ready.sort(key=lambda i: i.create_index, reverse=True)
    else:
        ready.sort(key=lambda i: i.create_index)
    return ready[:count]
