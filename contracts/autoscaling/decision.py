"""What one policy evaluation reads and decides: the inputs the autoscaler's shell supplies
(target status, metric points) and the decision record it keeps and shows (`explain`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from contracts.autoscaling.actions import ScalingAction
from contracts.fast_init import install_fast_inits

MetricPoint = tuple[float, float]  # (unix seconds, value)


class MetricReadError(Exception):
    """A metric source could not answer a query (unreachable, bad query, ...)."""


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """One query of a metric source over [start_s, end_s] (equal for an instant query)."""

    source: str
    query: str
    start_s: float
    end_s: float
    instant: bool = False


@dataclass(frozen=True, slots=True)
class TargetStatus:
    """A target as the autoscaler sees it at the start of an evaluation.

    `count` is what Nomad's target plugin reports (the group's running allocations, the
    fleet's ready nodes); `starting` counts allocations or nodes requested but not running
    yet. `ready` is false while the target cannot be scaled (a stopped job).
    `last_event_s` is the time of the target's latest scaling event, from which a
    restarted autoscaler resumes its cooldown."""

    ready: bool
    count: int
    starting: int = 0
    last_event_s: float | None = None
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One check of one evaluation: what it read and what it proposed."""

    name: str
    group: str
    strategy: str
    query: MetricQuery | None = None  # None: the strategy needs no metric (fixed-value)
    points_read: int = 0
    latest_value: float | None = None
    action: ScalingAction | None = None  # capped to [min, max]; None when the check failed
    error: str = ""
    ignored: bool = False  # failed, and on_error / on_check_error said to carry on


class Outcome(StrEnum):
    SCALE = "scale"  # a Scale call is due
    COOLDOWN = "cooldown"  # scaling is needed but the policy is cooling down
    IN_FLIGHT = "in-flight"  # scaling is needed but an earlier Scale call is unanswered
    NO_ACTION = "no-action"  # the winning action keeps the count as it is
    FAILED = "failed"  # a check failed and the policy says fail
    TARGET_MISSING = "target-missing"
    TARGET_NOT_READY = "target-not-ready"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Decision:
    """One evaluation of one policy.

    `proposed` is the winning check's action (capped to [min, max]); `action` is what would
    be sent after drover's behavior adjustments (listed in `adjustments`) and dry-run
    marking. The shell applies `action` only when `scale_due`, once per `decision_id`."""

    policy_id: str
    decision_id: str
    time_s: float
    outcome: Outcome
    reason: str
    current_count: int | None = None
    starting: int = 0
    checks: tuple[CheckOutcome, ...] = ()
    winner: str | None = None
    proposed: ScalingAction | None = None
    adjustments: tuple[str, ...] = ()
    action: ScalingAction | None = None
    state: str = "idle"
    cooldown_until_s: float | None = None
    scale_due: bool = False

    @property
    def capped(self) -> bool:
        return self.proposed is not None and self.proposed.capped


install_fast_inits(__name__)
