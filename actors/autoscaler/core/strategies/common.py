"""What the strategies share: their error, the latest metric value, step limits."""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.autoscaling import Direction, MetricPoint


class StrategyError(ValueError):
    """A strategy could not compute a count from what it was given."""


def latest_value(series: Sequence[MetricPoint]) -> float:
    """The newest point's value (the series is sorted by time, as the checks leave it)."""
    if not series:
        raise StrategyError("no metrics available")
    value = series[-1][1]
    if not math.isfinite(value):
        raise StrategyError(f"metric value {value} is not a finite number")
    return value


def ceil_count(value: float, what: str) -> int:
    """ceil(value) as a count; an overflow to infinity is an error, not a crash."""
    if not math.isfinite(value):
        raise StrategyError(f"{what} {value} is not a finite number")
    return math.ceil(value)


def limit_step(count: int, new_count: int, max_up: int | None, max_down: int | None) -> int:
    """`max_scale_up` / `max_scale_down`: at most that many allocations per action."""
    if max_up is not None:
        new_count = min(new_count, count + max_up)
    if max_down is not None:
        new_count = max(new_count, count - max_down)
    return new_count


def direction_of(count: int, new_count: int) -> Direction:
    if new_count > count:
        return Direction.UP
    if new_count < count:
        return Direction.DOWN
    return Direction.NONE
