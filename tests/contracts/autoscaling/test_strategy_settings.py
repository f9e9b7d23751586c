"""The settings of each strategy block, and drover's `behavior` block."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.autoscaling import (
    Behavior,
    DirectionBehavior,
    FixedValueConfig,
    PassThroughConfig,
    RateRule,
    StrategyConfig,
    TargetValueConfig,
    ThresholdConfig,
    parse_group_policy,
)
from contracts.errors import ValidationError

WHERE = 'job "x" > group "g"'
CHECK = f'{WHERE} > scaling > policy > check "c"'


def with_strategy(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    return {"check": {"c": {"query": "q", "strategy": {name: settings}}}}


def config(name: str, settings: dict[str, Any]) -> StrategyConfig:
    policy = parse_group_policy(with_strategy(name, settings), min=0, max=9, where=WHERE)
    return policy.checks[0].strategy.config


def problems(policy: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_group_policy(policy, min=0, max=9, where=WHERE)
    return info.value.problems


@pytest.mark.parametrize(
    ("name", "settings", "expected"),
    [
        ("target-value", {"target": 70}, TargetValueConfig(70.0)),
        (
            "target-value",
            {"target": "0.5", "threshold": 0.1, "max_scale_up": 3, "max_scale_down": "2"},
            TargetValueConfig(0.5, 0.1, 3, 2),
        ),
        (
            "threshold",
            {"upper_bound": 30, "delta": -1},
            ThresholdConfig(upper_bound=30.0, delta=-1),
        ),
        (
            "threshold",
            {"lower_bound": "70", "percentage": "-25.5", "within_bounds_trigger": 3},
            ThresholdConfig(lower_bound=70.0, percentage=-25.5, within_bounds_trigger=3),
        ),
        ("threshold", {"lower_bound": 1, "value": 0}, ThresholdConfig(lower_bound=1.0, value=0)),
        ("fixed-value", {"value": 4}, FixedValueConfig(4)),
        ("fixed-value", {"fixed": "4"}, FixedValueConfig(4)),  # the plugin's older key
        ("pass-through", {}, PassThroughConfig()),
        ("pass-through", {"max_scale_up": 1}, PassThroughConfig(max_scale_up=1)),
    ],
)
def test_settings(name: str, settings: dict[str, Any], expected: StrategyConfig) -> None:
    assert config(name, settings) == expected


@pytest.mark.parametrize(
    ("name", "settings", "expected"),
    [
        ("target-value", {}, "target is required"),
        ("target-value", {"target": "lots"}, 'target must be a finite number, got "lots"'),
        ("target-value", {"target": 1, "precision": 0.1}, 'unknown field "precision"'),
        (
            "target-value",
            {"target": 1, "max_scale_up": 1.5},
            "max_scale_up must be an integer, got 1.5",
        ),
        (
            "target-value",
            {"target": 1, "max_scale_down": -1},
            "max_scale_down must be at least 0, got -1",
        ),
        ("threshold", {"delta": 1}, "at least one of lower_bound, upper_bound is required"),
        (
            "threshold",
            {"lower_bound": 5, "upper_bound": 5, "delta": 1},
            "lower_bound 5 must be below upper_bound 5",
        ),
        (
            "threshold",
            {"lower_bound": 5},
            "exactly one of delta, percentage, value is required (got none)",
        ),
        (
            "threshold",
            {"lower_bound": 5, "delta": 1, "percentage": 2, "value": 3},
            "exactly one of delta, percentage, value is required "
            "(got delta and percentage and value)",
        ),
        ("threshold", {"lower_bound": 5, "delta": "1.5"}, 'delta must be an integer, got "1.5"'),
        ("threshold", {"lower_bound": 5, "value": -2}, "value must be at least 0, got -2"),
        (
            "threshold",
            {"lower_bound": 5, "delta": 1, "within_bounds_trigger": "x"},
            'within_bounds_trigger must be an integer, got "x"',
        ),
        ("fixed-value", {}, "exactly one of value, fixed is required (got none)"),
        (
            "fixed-value",
            {"value": 1, "fixed": 1},
            "exactly one of value, fixed is required (got value and fixed)",
        ),
        ("pass-through", {"max_scale_up": True}, "max_scale_up must be an integer, got true"),
    ],
)
def test_bad_settings(name: str, settings: dict[str, Any], expected: str) -> None:
    assert f'{CHECK} > strategy "{name}": {expected}' in problems(with_strategy(name, settings))


def behavior(block: dict[str, Any]) -> Behavior:
    policy = with_strategy("target-value", {"target": 1}) | {"behavior": block}
    return parse_group_policy(policy, min=0, max=9, where=WHERE).behavior


def test_behavior_block() -> None:
    parsed = behavior(
        {
            "count_starting": True,
            "scale_up": {
                "select_policy": "min",
                "rate": [
                    {"type": "pods", "value": 4, "period": "15s"},
                    {"type": "percent", "value": 100, "period": "15s"},
                ],
            },
            "scale_down": [{"stabilization_window": "5m"}],
        }
    )
    assert parsed == Behavior(
        scale_up=DirectionBehavior(
            select_policy="min",
            rates=(RateRule("pods", 4, 15.0), RateRule("percent", 100, 15.0)),
        ),
        scale_down=DirectionBehavior(stabilization_window_s=300.0),
        count_starting=True,
    )
    assert parsed.active and not Behavior().active


BEHAVIOR = f"{WHERE} > scaling > policy > behavior"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            {"count_starting": "sometimes"},
            f'{BEHAVIOR}: count_starting must be true or false, got "sometimes"',
        ),
        ({"scale_sideways": {}}, f'{BEHAVIOR}: unknown field "scale_sideways"'),
        (
            {"scale_up": {"stabilization_window": "2h"}},
            f'{BEHAVIOR} > scale_up: stabilization_window must be at most 3600s, got "2h"',
        ),
        (
            {"scale_down": {"select_policy": "fastest"}},
            f'{BEHAVIOR} > scale_down: select_policy must be one of "max", "min", "disabled", '
            'got "fastest"',
        ),
        (
            {"scale_up": {"rate": {"type": "nodes", "value": 1, "period": "1m"}}},
            f'{BEHAVIOR} > scale_up > rate[0]: type must be one of "pods", "percent", got "nodes"',
        ),
        (
            {"scale_up": {"rate": {"type": "pods", "value": 0, "period": "1m"}}},
            f"{BEHAVIOR} > scale_up > rate[0]: value must be at least 1, got 0",
        ),
        (
            {"scale_up": {"rate": {"type": "pods", "value": 1}}},
            f"{BEHAVIOR} > scale_up > rate[0]: period is required",
        ),
        (
            {"scale_up": {"rate": {"type": "pods", "value": 1, "period": "0s"}}},
            f"{BEHAVIOR} > scale_up > rate[0]: period must be above zero",
        ),
        (
            {"scale_up": {"rate": [{"type": "pods", "value": 1, "period": "1s"}] * 17}},
            f"{BEHAVIOR} > scale_up: 17 rate blocks, more than the 16 allowed",
        ),
    ],
)
def test_bad_behavior(block: dict[str, Any], expected: str) -> None:
    policy = with_strategy("target-value", {"target": 1}) | {"behavior": block}
    assert expected in problems(policy)
