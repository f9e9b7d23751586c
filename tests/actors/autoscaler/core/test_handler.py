"""The per-policy handler: when a Scale call is due, cooldowns (also resumed after a
restart), dry-run, and answering each decision once. Cases after nomad-autoscaler's
policy/handler_test.go (calculateRemainingCooldown, ScalingNeededAndCooldown,
ScalingNotNeeded, TargetNotFound, TargetNotReady)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from actors.autoscaler.core.handler import (
    SCALE_ANSWER_TIMEOUT_S,
    HandlerState,
    PolicyHandler,
    interval_splay_s,
    remaining_cooldown,
)
from contracts.autoscaling import (
    DRY_RUN_COUNT,
    META_DRY_RUN_COUNT,
    Check,
    Direction,
    MetricPoint,
    MetricQuery,
    OnError,
    Outcome,
    PassThroughConfig,
    Policy,
    StrategySpec,
    TargetSpec,
    TargetStatus,
    TargetValueConfig,
)

T0 = 1_700_000_000.0
MINUTE = 60.0


class Metric:
    """A metric source whose value the test sets; counts the queries it answers."""

    def __init__(self, value: float) -> None:
        self.value = value
        self.queries = 0

    def __call__(self, query: MetricQuery) -> Sequence[MetricPoint]:
        self.queries += 1
        return [(query.end_s, self.value)]


BASE = Policy(
    min=1,
    max=10,
    checks=(Check("cpu", StrategySpec("target-value", TargetValueConfig(10)), query="avg_cpu"),),
    target=TargetSpec(kind="job-group", job="web", group="api"),
    cooldown_s=10 * MINUTE,
    cooldown_on_scale_up_s=5 * MINUTE,
)


def make_policy(**changes: Any) -> Policy:
    return replace(BASE, **changes)


def ready(count: int, last_event_s: float | None = None) -> TargetStatus:
    return TargetStatus(ready=True, count=count, last_event_s=last_event_s)


@pytest.mark.parametrize(
    ("last_event_ago", "remaining"), [(10 * MINUTE, 10 * MINUTE), (25 * MINUTE, -5 * MINUTE)]
)
def test_remaining_cooldown(last_event_ago: float, remaining: float) -> None:
    assert remaining_cooldown(20 * MINUTE, T0, T0 - last_event_ago) == remaining


def test_scaling_needed_then_cooldown_then_scaling_again() -> None:
    handler = PolicyHandler("p", make_policy())
    metric = Metric(20.0)  # twice the target: 5 -> 10
    first = handler.tick(T0, ready(5), metric)
    assert first.scale_due and first.outcome is Outcome.SCALE
    assert first.action is not None and (first.action.count, first.action.direction) == (
        10,
        Direction.UP,
    )
    assert first.winner == "cpu" and first.checks[0].latest_value == 20.0
    assert first.state == HandlerState.SCALING.value
    assert handler.scale_succeeded(first.decision_id, T0 + 1)
    # an Up action cools down for cooldown_on_scale_up
    assert handler.state is HandlerState.COOLDOWN
    assert handler.cooldown_until_s == T0 + 1 + 5 * MINUTE

    during = handler.tick(T0 + MINUTE, ready(5), metric)
    assert during.outcome is Outcome.COOLDOWN and not during.scale_due
    assert during.action is not None and during.action.count == 10  # still recorded
    assert during.cooldown_until_s == T0 + 1 + 5 * MINUTE
    assert metric.queries == 2  # the evaluation runs during cooldown

    after = handler.tick(T0 + 1 + 5 * MINUTE + 1, ready(5), metric)
    assert after.scale_due and after.decision_id != first.decision_id


def test_a_scale_down_cools_down_for_cooldown() -> None:
    handler = PolicyHandler("p", make_policy())
    decision = handler.tick(T0, ready(8), Metric(5.0))
    assert decision.action is not None and decision.action.direction is Direction.DOWN
    handler.scale_succeeded(decision.decision_id, T0)
    assert handler.cooldown_until_s == T0 + 10 * MINUTE


def test_its_own_scaling_event_does_not_stretch_the_cooldown() -> None:
    """The event its scale-down wrote comes back on the next ticks: the cooldown stays the
    scale-down's, not the (longer) scale-up cooldown a resumed one would take."""
    handler = PolicyHandler("p", make_policy(cooldown_s=MINUTE, cooldown_on_scale_up_s=10 * MINUTE))
    decision = handler.tick(T0, ready(8), Metric(5.0))
    assert decision.scale_due and decision.action is not None
    handler.scale_succeeded(decision.decision_id, T0 + 0.2)
    handler.tick(T0 + 2, ready(4, last_event_s=T0 + 0.1), Metric(5.0))
    assert handler.cooldown_until_s == T0 + 0.2 + MINUTE
    after = handler.tick(T0 + 0.2 + MINUTE + 1, ready(4, last_event_s=T0 + 0.1), Metric(5.0))
    assert after.outcome is not Outcome.COOLDOWN


def test_scaling_not_needed() -> None:
    handler = PolicyHandler("p", make_policy())
    decision = handler.tick(T0, ready(5), Metric(10.0))
    assert decision.outcome is Outcome.NO_ACTION and not decision.scale_due
    assert handler.state is HandlerState.IDLE and handler.cooldown_until_s is None


def test_an_action_that_keeps_the_count_is_not_sent() -> None:
    spec = StrategySpec("pass-through", PassThroughConfig())
    handler = PolicyHandler("p", make_policy(checks=(Check("q", spec, query="q"),)))
    decision = handler.tick(T0, ready(2), Metric(2.5))  # Up, count 2
    assert decision.outcome is Outcome.NO_ACTION and decision.reason == "the count stays 2"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (None, Outcome.TARGET_MISSING),
        (TargetStatus(ready=False, count=1), Outcome.TARGET_NOT_READY),
    ],
)
def test_no_evaluation_without_a_ready_target(
    status: TargetStatus | None, outcome: Outcome
) -> None:
    metric = Metric(100.0)
    decision = PolicyHandler("p", make_policy()).tick(T0, status, metric)
    assert decision.outcome is outcome and not decision.scale_due
    assert metric.queries == 0


def test_a_disabled_policy_does_nothing() -> None:
    metric = Metric(100.0)
    decision = PolicyHandler("p", make_policy(enabled=False)).tick(T0, ready(1), metric)
    assert decision.outcome is Outcome.DISABLED and metric.queries == 0


def test_each_decision_is_due_once_and_answered_once() -> None:
    handler = PolicyHandler("p", make_policy())
    metric = Metric(20.0)
    first = handler.tick(T0, ready(5), metric)
    second = handler.tick(T0 + 10, ready(5), metric)
    assert second.outcome is Outcome.IN_FLIGHT and not second.scale_due
    assert not handler.scale_succeeded(second.decision_id, T0 + 11)
    assert handler.scale_succeeded(first.decision_id, T0 + 11)
    assert not handler.scale_succeeded(first.decision_id, T0 + 12)
    assert not handler.scale_failed(first.decision_id)
    assert handler.state is HandlerState.COOLDOWN


def test_a_failed_scale_call_returns_to_idle_without_cooldown() -> None:
    handler = PolicyHandler("p", make_policy())
    metric = Metric(20.0)
    first = handler.tick(T0, ready(5), metric)
    assert handler.scale_failed(first.decision_id)
    assert handler.state is HandlerState.IDLE and handler.cooldown_until_s is None
    assert handler.tick(T0 + 10, ready(5), metric).scale_due


def test_an_unanswered_scale_call_is_given_up() -> None:
    handler = PolicyHandler("p", make_policy())
    metric = Metric(20.0)
    first = handler.tick(T0, ready(5), metric)
    late = handler.tick(T0 + SCALE_ANSWER_TIMEOUT_S + 1, ready(5), metric)
    assert late.scale_due
    assert not handler.scale_succeeded(first.decision_id, T0 + SCALE_ANSWER_TIMEOUT_S + 2)


def test_cooldown_resumes_after_a_restart_from_the_last_scaling_event() -> None:
    handler = PolicyHandler("p", make_policy())
    metric = Metric(20.0)
    last_event = T0 - 2 * MINUTE
    decision = handler.tick(T0, ready(5, last_event), metric)
    # the direction of the event is unknown: the shorter cooldown_on_scale_up applies
    assert decision.outcome is Outcome.COOLDOWN
    assert decision.cooldown_until_s == last_event + 5 * MINUTE
    assert handler.tick(last_event + 5 * MINUTE + 1, ready(5, last_event), metric).scale_due


def test_an_old_scaling_event_puts_nothing_in_cooldown() -> None:
    handler = PolicyHandler("p", make_policy())
    assert handler.tick(T0, ready(5, T0 - 6 * MINUTE), Metric(20.0)).scale_due


def test_a_newer_scaling_event_made_by_hand_extends_the_cooldown() -> None:
    handler = PolicyHandler("p", make_policy())
    metric = Metric(10.0)
    handler.tick(T0, ready(5, T0 - 30 * MINUTE), metric)
    assert handler.state is HandlerState.IDLE
    metric.value = 20.0
    decision = handler.tick(T0 + MINUTE, ready(5, T0 + 30), metric)
    assert decision.outcome is Outcome.COOLDOWN
    assert decision.cooldown_until_s == T0 + 30 + 5 * MINUTE


def test_dry_run_sends_the_sentinel_and_still_cools_down() -> None:
    handler = PolicyHandler("p", make_policy(dry_run=True))
    decision = handler.tick(T0, ready(5), Metric(20.0))
    assert decision.scale_due and decision.action is not None
    assert decision.action.count == DRY_RUN_COUNT
    assert decision.action.meta[META_DRY_RUN_COUNT] == 10
    handler.scale_succeeded(decision.decision_id, T0)
    assert handler.cooldown_until_s == T0 + 5 * MINUTE


def test_a_failing_check_under_fail_aborts_the_evaluation() -> None:
    def broken(query: MetricQuery) -> Sequence[MetricPoint]:
        return []

    handler = PolicyHandler("p", make_policy(on_check_error=OnError.FAIL))
    decision = handler.tick(T0, ready(5), broken)
    assert decision.outcome is Outcome.FAILED and not decision.scale_due
    assert decision.reason == 'evaluation failed: check "cpu": no metrics available'


def test_capping_is_visible_in_the_decision() -> None:
    decision = PolicyHandler("p", make_policy()).tick(T0, ready(5), Metric(1000.0))
    assert decision.capped and decision.action is not None and decision.action.count == 10


def test_scale_to_zero_and_back() -> None:
    queue = StrategySpec("target-value", TargetValueConfig(target=0))
    policy = make_policy(min=0, checks=(Check("queue", queue, query="queued"),))
    handler = PolicyHandler("p", policy)
    down = handler.tick(T0, ready(3), Metric(0.0))
    assert down.action is not None and down.action.count == 0
    handler.scale_succeeded(down.decision_id, T0)
    up = handler.tick(T0 + 11 * MINUTE, ready(0), Metric(2.0))
    assert up.scale_due and up.action is not None and up.action.count == 2


def test_interval_splay_is_below_300ms_and_reproducible() -> None:
    draws = [interval_splay_s(random.Random(seed)) for seed in range(50)]
    assert all(0 <= d < 0.3 for d in draws)
    assert draws == [interval_splay_s(random.Random(seed)) for seed in range(50)]
    assert len(set(draws)) > 1


def test_update_policy_reports_an_interval_change_and_keeps_the_state() -> None:
    handler = PolicyHandler("p", make_policy())
    decision = handler.tick(T0, ready(5), Metric(20.0))
    handler.scale_succeeded(decision.decision_id, T0)
    assert not handler.update_policy(make_policy(max=20))
    assert handler.update_policy(make_policy(evaluation_interval_s=30.0))
    assert handler.state is HandlerState.COOLDOWN
