"""fixed-value and pass-through, with the cases of their nomad-autoscaler plugin tests."""

from __future__ import annotations

import pytest

from actors.autoscaler.core.strategies import StrategyError, needs_metrics, run_strategy
from actors.autoscaler.core.strategies.pass_through import calculate_direction
from contracts.autoscaling import (
    Direction,
    FixedValueConfig,
    PassThroughConfig,
    ScalingAction,
    StrategySpec,
)


def fixed(value: int, count: int) -> ScalingAction:
    return run_strategy(StrategySpec("fixed-value", FixedValueConfig(value)), count, [])


@pytest.mark.parametrize(
    ("value", "count", "expected"),
    [
        (13, 2, ScalingAction(13, Direction.UP, "scaling up because fixed value is 13")),
        (4, 10, ScalingAction(4, Direction.DOWN, "scaling down because fixed value is 4")),
        (10, 10, ScalingAction(10)),
        (1, 0, ScalingAction(1, Direction.UP, "scaling up because fixed value is 1")),
    ],
)
def test_fixed_value(value: int, count: int, expected: ScalingAction) -> None:
    assert fixed(value, count) == expected


def test_fixed_value_needs_no_metrics_and_the_others_do() -> None:
    assert not needs_metrics(StrategySpec("fixed-value", FixedValueConfig(3)))
    assert needs_metrics(StrategySpec("pass-through", PassThroughConfig()))


def passthrough(count: int, value: float, config: PassThroughConfig) -> ScalingAction:
    return run_strategy(StrategySpec("pass-through", config), count, [(0.0, value)])


@pytest.mark.parametrize(
    ("count", "value", "config", "expected"),
    [
        (
            2,
            13.0,
            PassThroughConfig(),
            ScalingAction(13, Direction.UP, "scaling up because metric is 13"),
        ),
        (
            2,
            0.0,
            PassThroughConfig(),
            ScalingAction(0, Direction.DOWN, "scaling down because metric is 0"),
        ),
        (10, 10.0, PassThroughConfig(), ScalingAction(10)),
        # the reason keeps the metric; the count is limited
        (
            2,
            13.0,
            PassThroughConfig(max_scale_up=3),
            ScalingAction(5, Direction.UP, "scaling up because metric is 13"),
        ),
        (
            10,
            3.0,
            PassThroughConfig(max_scale_down=1),
            ScalingAction(9, Direction.DOWN, "scaling down because metric is 3"),
        ),
        # the direction compares the raw value; the count truncates it
        (
            2,
            2.5,
            PassThroughConfig(),
            ScalingAction(2, Direction.UP, "scaling up because metric is 2"),
        ),
    ],
)
def test_pass_through(
    count: int, value: float, config: PassThroughConfig, expected: ScalingAction
) -> None:
    assert passthrough(count, value, config) == expected


def test_pass_through_needs_a_point() -> None:
    with pytest.raises(StrategyError, match="no metrics available"):
        run_strategy(StrategySpec("pass-through", PassThroughConfig()), 1, [])


@pytest.mark.parametrize(
    ("count", "metric", "expected"),
    [(0, 1.0, Direction.UP), (5, 5.0, Direction.NONE), (4, 0.0, Direction.DOWN)],
)
def test_pass_through_direction(count: int, metric: float, expected: Direction) -> None:
    assert calculate_direction(count, metric) is expected
