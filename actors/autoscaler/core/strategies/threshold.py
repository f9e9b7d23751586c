"""threshold: act when at least `within_bounds_trigger` points of the queried window lie in
[lower_bound, upper_bound) (lower inclusive, upper exclusive; a missing bound is open).

The new count is count + delta, ceil(count * (1 + percentage / 100)) or value, floored at
zero. Meant for tiers of checks sharing a `group`, e.g. [70, 100) -> +1 and [0, 30) -> -1
(plugins/builtin/strategy/threshold).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from actors.autoscaler.core.strategies.common import ceil_count, direction_of
from contracts.autoscaling import Direction, MetricPoint, ScalingAction, ThresholdConfig


def within_bounds(config: ThresholdConfig, series: Sequence[MetricPoint]) -> int:
    low = -math.inf if config.lower_bound is None else config.lower_bound
    high = math.inf if config.upper_bound is None else config.upper_bound
    return sum(1 for _, value in series if low <= value < high)


def new_count(config: ThresholdConfig, count: int) -> int:
    if config.delta is not None:
        result = count + config.delta
    elif config.percentage is not None:
        result = ceil_count(count * (1 + config.percentage / 100), "the new count")
    else:
        result = config.value or 0
    return max(result, 0)


def run(config: ThresholdConfig, count: int, series: Sequence[MetricPoint]) -> ScalingAction:
    if within_bounds(config, series) < config.within_bounds_trigger:
        return ScalingAction(count=count)
    target = new_count(config, count)
    direction = direction_of(count, target)
    if direction is Direction.NONE:
        return ScalingAction(count=count)
    return ScalingAction(
        count=target,
        direction=direction,
        reason=f"scaling {direction} because metric is within bounds",
    )
