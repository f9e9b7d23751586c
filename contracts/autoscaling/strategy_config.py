"""The `strategy "<name>" { ... }` block of a check, for the four built-in strategies.

Settings and their checks follow the nomad-autoscaler plugins (plugins/builtin/strategy):
target-value needs `target`; threshold needs a bound and exactly one of delta, percentage
and value (value not negative); fixed-value needs `value` (its older name `fixed` is
accepted too); max_scale_up / max_scale_down are whole numbers of allocations. Where Nomad
would only fail at evaluation time (a bad number, an unknown setting), drover refuses the
policy when it is submitted.
"""

from __future__ import annotations

from contracts.autoscaling.fields import Body, Fields, Where
from contracts.autoscaling.policy import (
    DEFAULT_TARGET_VALUE_THRESHOLD,
    DEFAULT_WITHIN_BOUNDS_TRIGGER,
    FixedValueConfig,
    PassThroughConfig,
    StrategyConfig,
    StrategySpec,
    TargetValueConfig,
    ThresholdConfig,
)

TARGET_VALUE = "target-value"
THRESHOLD = "threshold"
FIXED_VALUE = "fixed-value"
PASS_THROUGH = "pass-through"
STRATEGIES = (FIXED_VALUE, PASS_THROUGH, TARGET_VALUE, THRESHOLD)
METRIC_FREE_STRATEGIES = frozenset({FIXED_VALUE})


def parse_strategy(name: str, body: Body, where: Where, problems: list[str]) -> StrategySpec | None:
    here = where.block("strategy", name)
    fields = Fields(body, here, problems)
    config: StrategyConfig | None
    if name == TARGET_VALUE:
        config = _target_value(fields)
    elif name == THRESHOLD:
        config = _threshold(fields)
    elif name == FIXED_VALUE:
        config = _fixed_value(fields)
    elif name == PASS_THROUGH:
        config = PassThroughConfig(*_step_limits(fields))
    else:
        known = ", ".join(STRATEGIES)
        problems.append(here.at(f"unknown strategy; drover has {known}"))
        return None
    fields.finish()
    return None if config is None else StrategySpec(name, config)


def _step_limits(fields: Fields) -> tuple[int | None, int | None]:
    return (
        fields.integer("max_scale_up", minimum=0),
        fields.integer("max_scale_down", minimum=0),
    )


def _target_value(fields: Fields) -> TargetValueConfig | None:
    target = fields.number("target")
    if not fields.has("target"):
        fields.error("target is required")
    threshold = fields.number("threshold")
    if threshold is not None and threshold < 0:
        fields.bad("threshold", "a number that is not negative", fields.raw("threshold"))
    up, down = _step_limits(fields)
    if target is None:
        return None
    return TargetValueConfig(
        target=target,
        threshold=DEFAULT_TARGET_VALUE_THRESHOLD if threshold is None else max(threshold, 0.0),
        max_scale_up=up,
        max_scale_down=down,
    )


def _threshold(fields: Fields) -> ThresholdConfig | None:
    lower, upper = fields.number("lower_bound"), fields.number("upper_bound")
    if not fields.has("lower_bound") and not fields.has("upper_bound"):
        fields.error("at least one of lower_bound, upper_bound is required")
    if lower is not None and upper is not None and lower >= upper:
        fields.error(f"lower_bound {lower:g} must be below upper_bound {upper:g}")
    actions = [key for key in ("delta", "percentage", "value") if fields.has(key)]
    if len(actions) != 1:
        got = " and ".join(actions) if actions else "none"
        fields.error(f"exactly one of delta, percentage, value is required (got {got})")
    delta = fields.integer("delta")
    percentage = fields.number("percentage")
    value = fields.integer("value", minimum=0)
    trigger = fields.integer("within_bounds_trigger", minimum=0)
    return ThresholdConfig(
        lower_bound=lower,
        upper_bound=upper,
        delta=delta,
        percentage=percentage,
        value=value,
        within_bounds_trigger=DEFAULT_WITHIN_BOUNDS_TRIGGER if trigger is None else trigger,
    )


def _fixed_value(fields: Fields) -> FixedValueConfig | None:
    keys = [key for key in ("value", "fixed") if fields.has(key)]
    if len(keys) != 1:
        got = " and ".join(keys) if keys else "none"
        fields.error(f"exactly one of value, fixed is required (got {got})")
    values = [fields.integer(key, minimum=0) for key in ("value", "fixed")]
    chosen = next((v for v in values if v is not None), None)
    return None if chosen is None or len(keys) != 1 else FixedValueConfig(chosen)
