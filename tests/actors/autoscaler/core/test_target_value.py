"""target-value, with the cases of nomad-autoscaler's target-value plugin_test.go."""

from __future__ import annotations

import pytest

from actors.autoscaler.core.strategies import StrategyError, run_strategy
from actors.autoscaler.core.strategies.target_value import calculate_direction
from contracts.autoscaling import Direction, ScalingAction, StrategySpec, TargetValueConfig

TV = TargetValueConfig


def run(count: int, values: list[float], config: TargetValueConfig) -> ScalingAction:
    series = [(float(i), v) for i, v in enumerate(values)]
    return run_strategy(StrategySpec("target-value", config), count, series)


@pytest.mark.parametrize(
    ("count", "value", "config", "expected"),
    [
        # factor 1 at a non-zero count: nothing to do
        (2, 13.0, TV(target=13), None),
        # factor 2 doubles the count
        (2, 26.0, TV(target=13), (4, "scaling up because factor is 2.000000")),
        # from zero the factor itself is the count
        (0, 20.0, TV(target=10), (2, "scaling up because factor is 2.000000")),
        # ceil(1 * 0.9) = 1: the count would not change
        (1, 9.0, TV(target=10), None),
        # target 0 (a queue to keep empty): the metric is the factor
        (0, 1.0, TV(target=0), (1, "scaling up because factor is 1.000000")),
        (5, 0.0, TV(target=0), (0, "scaling down because factor is 0.000000")),
        # within the default threshold of 0.01 ...
        (8, 5.00001, TV(target=5), None),
        # ... but not within a smaller one
        (
            8,
            5.00001,
            TV(target=5, threshold=0.000001),
            (9, "scaling up because factor is 1.000002"),
        ),
        # step limits
        (1, 210.0, TV(target=50, max_scale_up=2), (3, "scaling up because factor is 4.200000")),
        (
            5,
            10.0,
            TV(target=210, max_scale_down=1),
            (4, "scaling down because factor is 0.047619"),
        ),
    ],
)
def test_run(
    count: int, value: float, config: TargetValueConfig, expected: tuple[int, str] | None
) -> None:
    action = run(count, [value], config)
    if expected is None:
        assert action == ScalingAction(count=count, direction=Direction.NONE)
    else:
        direction = Direction.UP if expected[0] > count else Direction.DOWN
        assert action == ScalingAction(count=expected[0], direction=direction, reason=expected[1])


def test_only_the_latest_point_counts() -> None:
    assert run(4, [13, 14, 15, 16], TV(target=16)).direction is Direction.NONE
    assert run(4, [16, 15, 14, 32], TV(target=16)).count == 8


def test_a_zero_step_limit_forbids_that_direction() -> None:
    assert run(4, [100.0], TV(target=10, max_scale_up=0)).direction is Direction.NONE


@pytest.mark.parametrize(
    ("count", "factor", "threshold", "expected"),
    [
        (0, 1.0, 0.0, Direction.UP),
        (0, 0.0, 0.0, Direction.NONE),
        (5, 1.0, 0.0, Direction.NONE),
        (4, 0.5, 0.0, Direction.DOWN),
        (5, 2.0, 0.0, Direction.UP),
        (5, 1.0001, 0.01, Direction.NONE),
        (5, 1.02, 0.01, Direction.UP),
        (5, 0.99, 0.01, Direction.NONE),
        (5, 0.98, 0.01, Direction.DOWN),
    ],
)
def test_calculate_direction(
    count: int, factor: float, threshold: float, expected: Direction
) -> None:
    assert calculate_direction(count, factor, threshold) is expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([], "no metrics available"),
        ([float("nan")], "not a finite number"),
        ([1e300], "the new count inf is not a finite number"),  # 1e300 / 1e-10 overflows
    ],
)
def test_unusable_metrics_are_strategy_errors(values: list[float], message: str) -> None:
    with pytest.raises(StrategyError, match=message):
        run(1, values, TV(target=1e-10))
