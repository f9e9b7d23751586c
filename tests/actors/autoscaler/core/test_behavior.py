"""drover's optional damping: starting capacity, HPA stabilization windows and rate rules."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Literal

import pytest

from actors.autoscaler.core.behavior import (
    Recommendation,
    ScaleEvent,
    hold_if_starting,
    rate_limit,
    stabilize,
)
from actors.autoscaler.core.handler import PolicyHandler
from contracts.autoscaling import (
    Behavior,
    Check,
    Direction,
    DirectionBehavior,
    MetricPoint,
    MetricQuery,
    Outcome,
    Policy,
    RateRule,
    ScalingAction,
    StrategySpec,
    TargetSpec,
    TargetStatus,
    TargetValueConfig,
)

T0 = 1_700_000_000.0
MINUTE = 60.0


def up_to(count: int) -> ScalingAction:
    return ScalingAction(count=count, direction=Direction.UP, reason="r")


@pytest.mark.parametrize(
    ("action", "running", "starting", "held"),
    [
        (up_to(4), 2, 2, True),  # the two starting allocations make the four
        (up_to(3), 2, 2, True),
        (up_to(5), 2, 2, False),  # one more is really needed
        (up_to(4), 2, 0, False),
        (ScalingAction(count=1, direction=Direction.DOWN), 2, 2, False),
    ],
)
def test_hold_if_starting(action: ScalingAction, running: int, starting: int, held: bool) -> None:
    result, note = hold_if_starting(action, running, starting)
    if held:
        assert (result.direction, result.count) == (Direction.NONE, running)
        assert note == result.reason and "already provide it" in note
    else:
        assert (result, note) == (action, "")


def windows(up_s: float = 0.0, down_s: float = 0.0) -> Behavior:
    return Behavior(
        scale_up=DirectionBehavior(stabilization_window_s=up_s),
        scale_down=DirectionBehavior(stabilization_window_s=down_s),
    )


def history(*points: tuple[float, int]) -> list[Recommendation]:
    return [Recommendation(T0 - ago, count) for ago, count in points]


def test_stabilization_uses_the_highest_recommendation_of_the_down_window() -> None:
    recent = history((4 * MINUTE, 5), (2 * MINUTE, 5))
    assert stabilize(5, 3, recent, T0, windows(down_s=5 * MINUTE)) == 5
    assert stabilize(5, 3, recent, T0, windows(down_s=MINUTE)) == 3
    assert stabilize(5, 3, history((2 * MINUTE, 4)), T0, windows(down_s=5 * MINUTE)) == 4


def test_stabilization_uses_the_lowest_recommendation_of_the_up_window() -> None:
    assert stabilize(2, 6, history((MINUTE, 2)), T0, windows(up_s=3 * MINUTE)) == 2
    assert stabilize(2, 6, history((MINUTE, 4)), T0, windows(up_s=3 * MINUTE)) == 4
    assert stabilize(2, 6, history((MINUTE, 2)), T0, windows()) == 6


Select = Literal["max", "min", "disabled"]


def rules(select: Select, *rates: RateRule) -> DirectionBehavior:
    return DirectionBehavior(select_policy=select, rates=rates)


PODS_4 = RateRule("pods", 4, 60.0)
PERCENT_10 = RateRule("percent", 10, 60.0)


def test_scale_down_rate_follows_the_hpa_worked_example() -> None:
    """Pods 4 and Percent 10 per 60 s, the largest change wins: 80 -> 72 -> 64 -> 57 ..."""
    behavior = Behavior(scale_down=rules("max", PODS_4, PERCENT_10))
    events: deque[ScaleEvent] = deque()
    assert rate_limit(80, 10, events, T0, behavior) == 72
    events.append(ScaleEvent(T0, -8))
    # within the period the 8 removed count against the count at its start
    assert rate_limit(72, 10, events, T0 + 30, behavior) == 72
    events.clear()
    assert rate_limit(72, 10, events, T0 + 61, behavior) == 64
    assert rate_limit(64, 10, events, T0 + 122, behavior) == 57
    # below 40 the 4-allocation rule allows more
    assert rate_limit(30, 10, events, T0, behavior) == 26


@pytest.mark.parametrize(("select", "limit"), [("max", 6), ("min", 4), ("disabled", 2)])
def test_scale_up_rate_select_policy(select: Select, limit: int) -> None:
    behavior = Behavior(
        scale_up=rules(select, RateRule("pods", 2, 15.0), RateRule("percent", 200, 15.0))
    )
    assert rate_limit(2, 20, deque(), T0, behavior) == limit


def test_no_rate_rule_means_no_limit_and_a_limit_never_reverses() -> None:
    assert rate_limit(2, 20, deque(), T0, Behavior()) == 20
    behavior = Behavior(scale_up=rules("max", RateRule("pods", 1, 60.0)))
    recent = deque([ScaleEvent(T0 - 10, 5)])
    assert rate_limit(7, 9, recent, T0, behavior) == 7


class Metric:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, query: MetricQuery) -> Sequence[MetricPoint]:
        return [(query.end_s, self.value)]


def policy(behavior: Behavior) -> Policy:
    return Policy(
        min=1,
        max=20,
        checks=(Check("cpu", StrategySpec("target-value", TargetValueConfig(10)), query="q"),),
        target=TargetSpec(kind="job-group"),
        cooldown_s=1.0,
        cooldown_on_scale_up_s=1.0,
        behavior=behavior,
    )


def test_a_dip_shorter_than_the_down_window_removes_nothing() -> None:
    handler = PolicyHandler("p", policy(windows(down_s=5 * MINUTE)))
    status = TargetStatus(ready=True, count=4)
    metric = Metric(10.0)
    assert handler.tick(T0, status, metric).outcome is Outcome.NO_ACTION
    metric.value = 5.0  # would halve the count
    dip = handler.tick(T0 + MINUTE, status, metric)
    assert dip.outcome is Outcome.NO_ACTION
    assert dip.adjustments == ("stabilized from 2 to 4",)
    assert dip.proposed is not None and dip.proposed.count == 2
    # once the window holds only low recommendations, the scale-in happens
    later = handler.tick(T0 + MINUTE + 5 * MINUTE + 1, status, metric)
    assert later.scale_due and later.action is not None and later.action.count == 2


def test_rate_rules_count_the_handlers_own_scalings() -> None:
    behavior = Behavior(scale_up=rules("max", RateRule("pods", 2, 60.0)))
    handler = PolicyHandler("p", policy(behavior))
    first = handler.tick(T0, TargetStatus(ready=True, count=2), Metric(50.0))
    assert first.action is not None and first.action.count == 4
    assert first.adjustments == ("rate limited from 10 to 4",)
    assert first.action.reason.endswith("; rate limited from 10 to 4")
    handler.scale_succeeded(first.decision_id, T0)
    held = handler.tick(T0 + 10, TargetStatus(ready=True, count=4), Metric(50.0))
    assert held.outcome is Outcome.NO_ACTION  # the 2 added fill this period's allowance
    again = handler.tick(T0 + 61, TargetStatus(ready=True, count=4), Metric(50.0))
    assert again.action is not None and again.action.count == 6


def test_starting_allocations_count_as_capacity() -> None:
    handler = PolicyHandler("p", policy(Behavior(count_starting=True)))
    slow = TargetStatus(ready=True, count=2, starting=2)
    decision = handler.tick(T0, slow, Metric(20.0))  # wants 4: two are starting
    assert decision.outcome is Outcome.NO_ACTION
    assert len(decision.adjustments) == 1 and "2 starting" in decision.adjustments[0]
    more = handler.tick(T0 + 10, slow, Metric(30.0))  # wants 6: two more than starting
    assert more.scale_due and more.action is not None and more.action.count == 6


def test_the_default_behavior_changes_nothing() -> None:
    plain = PolicyHandler("p", policy(Behavior()))
    slow = TargetStatus(ready=True, count=2, starting=2)
    decision = plain.tick(T0, slow, Metric(20.0))
    assert decision.scale_due and decision.adjustments == ()
    assert decision.action == decision.proposed
