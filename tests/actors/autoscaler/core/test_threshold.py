"""threshold, with the cases of nomad-autoscaler's threshold plugin_test.go."""

from __future__ import annotations

import pytest

from actors.autoscaler.core.strategies import run_strategy
from contracts.autoscaling import Direction, ScalingAction, StrategySpec, ThresholdConfig

SIX_TENS = [10.0] * 6
TC = ThresholdConfig


def run(count: int, values: list[float], config: ThresholdConfig) -> ScalingAction:
    return run_strategy(StrategySpec("threshold", config), count, list(enumerate(values)))


def up(count: int) -> ScalingAction:
    return ScalingAction(count, Direction.UP, "scaling up because metric is within bounds")


def down(count: int) -> ScalingAction:
    return ScalingAction(count, Direction.DOWN, "scaling down because metric is within bounds")


@pytest.mark.parametrize(
    ("count", "values", "config", "expected"),
    [
        (1, SIX_TENS, TC(5, 20, delta=1), up(2)),
        (1, SIX_TENS, TC(5, 20, delta=-1), down(0)),
        (10, SIX_TENS, TC(5, 20, percentage=30), up(13)),
        (10, SIX_TENS, TC(5, 20, percentage=-30), down(7)),
        (10, SIX_TENS, TC(5, 20, percentage=0), ScalingAction(10)),
        (1, SIX_TENS, TC(5, 20, value=10), up(10)),
        (20, SIX_TENS, TC(5, 20, value=10), down(10)),
        (10, SIX_TENS, TC(5, 20, value=10), ScalingAction(10)),
        # only one of six points within bounds: below the default trigger of 5
        (1, [10, 0, 0, 0, 0, 0], TC(5, 20, delta=1), ScalingAction(1)),
        (1, [10, 0, 0, 0, 0, 0], TC(5, 20, delta=1, within_bounds_trigger=1), up(2)),
    ],
)
def test_run(
    count: int, values: list[float], config: ThresholdConfig, expected: ScalingAction
) -> None:
    assert run(count, values, config) == expected


def test_lower_bound_is_inclusive_and_upper_bound_exclusive() -> None:
    one = TC(5, 20, delta=1, within_bounds_trigger=1)
    assert run(1, [5.0], one) == up(2)
    assert run(1, [20.0], one) == ScalingAction(1)


def test_a_missing_bound_is_open() -> None:
    assert run(3, [1e300] * 5, TC(lower_bound=70, delta=1)) == up(4)
    assert run(3, [-1e300] * 5, TC(upper_bound=30, delta=-1)) == down(2)


def test_counts_are_floored_at_zero() -> None:
    # from zero, -1 would be negative: floored to 0, the count does not change
    assert run(0, SIX_TENS, TC(lower_bound=5, delta=-1)) == ScalingAction(0)
    assert run(2, SIX_TENS, TC(lower_bound=5, delta=-5)) == down(0)
    assert run(3, SIX_TENS, TC(lower_bound=5, percentage=-150)) == down(0)


def test_the_trigger_counts_points_over_the_whole_window() -> None:
    values = [50.0, 80.0, 90.0, 10.0, 75.0, 99.0, 71.0]  # five points in [70, 100)
    assert run(2, values, TC(70, 100, delta=1)) == up(3)
    assert run(2, values[:-1], TC(70, 100, delta=1)) == ScalingAction(2)
