"""The built-in strategies: current count + metric series -> proposed ScalingAction.

A strategy that proposes nothing returns an action with direction NONE and the current
count (Nomad leaves such an action's count at 0; drover keeps the count so a decision reads
sensibly)."""

from __future__ import annotations

from collections.abc import Sequence

from actors.autoscaler.core.strategies import fixed_value, pass_through, target_value, threshold
from actors.autoscaler.core.strategies.common import StrategyError
from contracts.autoscaling import (
    FixedValueConfig,
    MetricPoint,
    PassThroughConfig,
    ScalingAction,
    StrategySpec,
    TargetValueConfig,
    ThresholdConfig,
)

__all__ = ["StrategyError", "needs_metrics", "run_strategy"]


def needs_metrics(spec: StrategySpec) -> bool:
    return not isinstance(spec.config, FixedValueConfig)


def run_strategy(spec: StrategySpec, count: int, series: Sequence[MetricPoint]) -> ScalingAction:
    """Raises StrategyError when the metrics cannot give a count (no point, not finite)."""
    config = spec.config
    if isinstance(config, TargetValueConfig):
        return target_value.run(config, count, series)
    if isinstance(config, ThresholdConfig):
        return threshold.run(config, count, series)
    if isinstance(config, FixedValueConfig):
        return fixed_value.run(config, count)
    if isinstance(config, PassThroughConfig):
        return pass_through.run(config, count, series)
    raise StrategyError(f"unknown strategy {spec.name!r}")
