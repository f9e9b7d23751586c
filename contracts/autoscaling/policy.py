"""Parsed scaling policies: Nomad Autoscaler's policy document as typed records.

Defaults are Nomad Autoscaler's (agent/config, policy/source.go, the strategy plugins):
evaluation interval 10 s, cooldown 5 min, `cooldown_on_scale_up` = `cooldown`, query window
1 min, `on_check_error` unset = ignore, target-value threshold 0.01, threshold's
`within_bounds_trigger` 5, node drain deadline 15 min, node selector `least_busy`.

`Behavior` holds drover's extensions beyond Nomad (the Kubernetes HPA's stabilization
windows and rate limits, counting starting allocations as capacity). Its defaults change
nothing, so a Nomad policy behaves exactly as under the Nomad Autoscaler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from contracts.fast_init import install_fast_inits

DEFAULT_SOURCE = "drover"
DEFAULT_EVALUATION_INTERVAL_S = 10.0
DEFAULT_COOLDOWN_S = 300.0
DEFAULT_QUERY_WINDOW_S = 60.0
DEFAULT_TARGET_VALUE_THRESHOLD = 0.01
DEFAULT_WITHIN_BOUNDS_TRIGGER = 5
DEFAULT_NODE_DRAIN_DEADLINE_S = 900.0
DEFAULT_NODE_SELECTOR = "least_busy"
NODE_SELECTORS = (
    "least_busy",
    "empty",
    "empty_ignore_system",
    "newest_create_index",
    "oldest_create_index",
)


class OnError(StrEnum):
    FAIL = "fail"
    IGNORE = "ignore"


@dataclass(frozen=True, slots=True)
class TargetValueConfig:
    """`strategy "target-value"`: keep the latest metric value at `target`."""

    target: float
    threshold: float = DEFAULT_TARGET_VALUE_THRESHOLD
    max_scale_up: int | None = None
    max_scale_down: int | None = None


@dataclass(frozen=True, slots=True)
class ThresholdConfig:
    """`strategy "threshold"`: act when enough points lie in [lower_bound, upper_bound).

    Exactly one of delta, percentage and value is set; a missing bound is unbounded."""

    lower_bound: float | None = None
    upper_bound: float | None = None
    delta: int | None = None
    percentage: float | None = None
    value: int | None = None
    within_bounds_trigger: int = DEFAULT_WITHIN_BOUNDS_TRIGGER


@dataclass(frozen=True, slots=True)
class FixedValueConfig:
    """`strategy "fixed-value"`: always the same count; runs no query."""

    value: int


@dataclass(frozen=True, slots=True)
class PassThroughConfig:
    """`strategy "pass-through"`: the latest metric value is the count."""

    max_scale_up: int | None = None
    max_scale_down: int | None = None


StrategyConfig = TargetValueConfig | ThresholdConfig | FixedValueConfig | PassThroughConfig


@dataclass(frozen=True, slots=True)
class StrategySpec:
    name: str
    config: StrategyConfig


@dataclass(frozen=True, slots=True)
class Check:
    """One `check "name" { ... }` block."""

    name: str
    strategy: StrategySpec
    source: str = DEFAULT_SOURCE
    query: str = ""
    query_window_s: float = DEFAULT_QUERY_WINDOW_S
    query_window_offset_s: float = 0.0
    query_instant: bool = False
    group: str = ""
    on_error: OnError | None = None  # None: the policy's on_check_error decides


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """What a policy scales: a job's group, or a fleet of client nodes.

    `extras` keeps the target block's other settings as strings, as Nomad hands a target
    plugin its configuration."""

    kind: Literal["job-group", "fleet"]
    job: str = ""
    group: str = ""
    namespace: str = "default"
    fleet: str = ""
    node_selector_strategy: str = DEFAULT_NODE_SELECTOR
    node_drain_deadline_s: float = DEFAULT_NODE_DRAIN_DEADLINE_S
    extras: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RateRule:
    """At most `value` allocations (`pods`) or `value` percent (`percent`) of the count at
    the start of the last `period_s` seconds may be added (or removed) in that period."""

    kind: Literal["pods", "percent"]
    value: int
    period_s: float


@dataclass(frozen=True, slots=True)
class DirectionBehavior:
    """HPA's per-direction behavior: a stabilization window and rate rules.

    `select_policy`: "max" lets the rule allowing the largest change win, "min" the
    smallest, "disabled" forbids scaling in this direction."""

    stabilization_window_s: float = 0.0
    select_policy: Literal["max", "min", "disabled"] = "max"
    rates: tuple[RateRule, ...] = ()


@dataclass(frozen=True, slots=True)
class Behavior:
    scale_up: DirectionBehavior = DirectionBehavior()
    scale_down: DirectionBehavior = DirectionBehavior()
    count_starting: bool = False

    @property
    def active(self) -> bool:
        return self != Behavior()


@dataclass(frozen=True, slots=True)
class Policy:
    min: int
    max: int
    checks: tuple[Check, ...]
    target: TargetSpec
    enabled: bool = True
    evaluation_interval_s: float = DEFAULT_EVALUATION_INTERVAL_S
    cooldown_s: float = DEFAULT_COOLDOWN_S
    cooldown_on_scale_up_s: float = DEFAULT_COOLDOWN_S
    on_check_error: OnError = OnError.IGNORE
    dry_run: bool = False
    behavior: Behavior = Behavior()


@dataclass(frozen=True, slots=True)
class ClusterPolicy:
    """A `scaling "name" { ... }` block of a policy file."""

    name: str
    path: str
    type: Literal["cluster", "horizontal"]
    policy: Policy


install_fast_inits(__name__)
