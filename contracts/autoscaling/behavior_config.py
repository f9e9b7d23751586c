"""drover's `behavior { ... }` block in a policy: damping beyond the Nomad Autoscaler.

Nomad has no `behavior` key, so a Nomad policy never sets one and behaves exactly as under
the Nomad Autoscaler. The block borrows the Kubernetes HPA's `behavior` field:

    behavior {
      count_starting = true            # allocations still starting count as capacity
      scale_up {
        stabilization_window = "0s"    # use the lowest recommendation of this window
        select_policy        = "max"   # max | min | disabled
        rate { type = "pods"    value = 4    period = "15s" }
        rate { type = "percent" value = 100  period = "15s" }
      }
      scale_down {
        stabilization_window = "5m"    # use the highest recommendation of this window
        rate { type = "percent" value = 50 period = "1m" }
      }
    }

Everything is optional and defaults to "no effect" (no window, no rate rule), unlike the
HPA, whose defaults damp scale-down by 5 minutes: drover does not change a policy's
behaviour unless asked. Windows are at most an hour and periods at most 30 minutes, as in
the HPA; a direction has at most 16 rate rules.
"""

from __future__ import annotations

from typing import Literal

from contracts.autoscaling.fields import Fields, Where, repeated_blocks, single_block
from contracts.autoscaling.policy import Behavior, DirectionBehavior, RateRule

MAX_WINDOW_S = 3600.0
MAX_PERIOD_S = 1800.0
MAX_RATE_RULES = 16
_SELECT: dict[str, Literal["max", "min", "disabled"]] = {
    "max": "max",
    "min": "min",
    "disabled": "disabled",
}
_KINDS = ("pods", "percent")


def parse_behavior(value: object, where: Where, problems: list[str]) -> Behavior:
    body = single_block(value, "behavior", where, problems)
    if body is None:
        return Behavior()
    here = where.block("behavior")
    fields = Fields(body, here, problems)
    count_starting = fields.boolean("count_starting", False)
    up = _direction(fields, "scale_up", here, problems)
    down = _direction(fields, "scale_down", here, problems)
    fields.finish()
    return Behavior(scale_up=up, scale_down=down, count_starting=count_starting)


def _direction(fields: Fields, name: str, where: Where, problems: list[str]) -> DirectionBehavior:
    if not fields.has(name):
        return DirectionBehavior()
    body = single_block(fields.raw(name), name, where, problems)
    if body is None:
        return DirectionBehavior()
    here = where.block(name)
    inner = Fields(body, here, problems)
    window = inner.duration("stabilization_window", 0.0, maximum=MAX_WINDOW_S)
    select = _SELECT[inner.choice("select_policy", tuple(_SELECT), "max")]
    rates: list[RateRule] = []
    if inner.has("rate"):
        for i, rate in enumerate(
            repeated_blocks(inner.raw("rate"), "rate", here, problems, MAX_RATE_RULES)
        ):
            rule = _rate(Fields(rate, here.block(f"rate[{i}]"), problems))
            if rule is not None:
                rates.append(rule)
    inner.finish()
    return DirectionBehavior(
        stabilization_window_s=window, select_policy=select, rates=tuple(rates)
    )


def _rate(fields: Fields) -> RateRule | None:
    kind = fields.choice("type", _KINDS, "pods") if fields.has("type") else None
    if kind is None:
        fields.error("type is required")
    value = fields.integer("value", minimum=1)
    if not fields.has("value"):
        fields.error("value is required")
    before = len(fields.problems)
    period = fields.duration("period", 0.0, maximum=MAX_PERIOD_S)
    if not fields.has("period"):
        fields.error("period is required")
    elif period <= 0 and len(fields.problems) == before:
        fields.error("period must be above zero")
    fields.finish()
    if kind is None or value is None or period <= 0:
        return None
    return RateRule(kind="percent" if kind == "percent" else "pods", value=value, period_s=period)
