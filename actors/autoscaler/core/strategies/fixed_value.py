"""fixed-value: the count is `value`, whatever the metrics (no query is run)."""

from __future__ import annotations

from actors.autoscaler.core.strategies.common import direction_of
from contracts.autoscaling import Direction, FixedValueConfig, ScalingAction


def run(config: FixedValueConfig, count: int) -> ScalingAction:
    direction = direction_of(count, config.value)
    if direction is Direction.NONE:
        return ScalingAction(count=count)
    return ScalingAction(
        count=config.value,
        direction=direction,
        reason=f"scaling {direction} because fixed value is {config.value}",
    )
