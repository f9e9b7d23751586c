"""pass-through: the latest metric value, truncated to an integer, is the count, limited by
max_scale_up / max_scale_down. The direction compares the raw value with the count, as the
plugin does, so a value of 2.5 against a count of 2 is an Up action to 2 (which the handler
then skips as "count unchanged")."""

from __future__ import annotations

from collections.abc import Sequence

from actors.autoscaler.core.strategies.common import latest_value, limit_step
from contracts.autoscaling import Direction, MetricPoint, PassThroughConfig, ScalingAction


def calculate_direction(count: int, value: float) -> Direction:
    if value > count:
        return Direction.UP
    if value < count:
        return Direction.DOWN
    return Direction.NONE


def run(config: PassThroughConfig, count: int, series: Sequence[MetricPoint]) -> ScalingAction:
    value = latest_value(series)
    direction = calculate_direction(count, value)
    if direction is Direction.NONE:
        return ScalingAction(count=count)
    wanted = int(value)  # truncates toward zero, as Go's int64(float64)
    return ScalingAction(
        count=limit_step(count, wanted, config.max_scale_up, config.max_scale_down),
        direction=direction,
        reason=f"scaling {direction} because metric is {wanted}",
    )
