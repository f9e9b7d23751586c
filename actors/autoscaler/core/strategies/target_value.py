"""target-value: keep the latest metric value at `target` by scaling the count linearly.

factor = value / target (value itself when target is 0, e.g. "keep this queue empty");
no action while factor is within [1 - threshold, 1 + threshold]; from a count of 0 the new
count is ceil(factor), otherwise ceil(count * factor), then limited by max_scale_up /
max_scale_down. Only the latest point counts (plugins/builtin/strategy/target-value).
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.autoscaler.core.strategies.common import ceil_count, latest_value, limit_step
from contracts.autoscaling import Direction, MetricPoint, ScalingAction, TargetValueConfig


def calculate_direction(count: int, factor: float, threshold: float) -> Direction:
    if count == 0:
        return Direction.UP if factor > 0 else Direction.NONE
    if factor < 1 - threshold:
        return Direction.DOWN
    if factor > 1 + threshold:
        return Direction.UP
    return Direction.NONE


def run(config: TargetValueConfig, count: int, series: Sequence[MetricPoint]) -> ScalingAction:
    value = latest_value(series)
    factor = value if config.target == 0 else value / config.target
    direction = calculate_direction(count, factor, config.threshold)
    if direction is Direction.NONE:
        return ScalingAction(count=count)
    new_count = ceil_count(factor if count == 0 else count * factor, "the new count")
    new_count = limit_step(count, new_count, config.max_scale_up, config.max_scale_down)
    if new_count == count:
        return ScalingAction(count=count)
    return ScalingAction(
        count=new_count,
        direction=direction,
        reason=f"scaling {direction} because factor is {factor:f}",
    )
