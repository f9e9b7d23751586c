"""The plan hold alone (the leader's use of it: test_service.py): which plans it takes, when
it ends, and the order it gives them back in."""

from __future__ import annotations

import pytest

from actors.leader.plan_hold import PlanHold
from contracts import Plan
from contracts.messages import PlanSubmission


def submission(eval_id: str, job_id: str = "web", priority: int = 50) -> PlanSubmission:
    return PlanSubmission(Plan(eval_id=eval_id, job_id=job_id, priority=priority), "reply")


def test_it_takes_the_next_plans_of_its_jobs_and_gives_them_back_by_priority() -> None:
    hold = PlanHold()
    assert not hold.take(submission("before"), {})  # no hold yet
    hold.start(2, timeout_s=60, job_ids=["web", "api"])
    assert not hold.take(submission("other", job_id="db"), {})
    assert hold.take(submission("low", priority=10), {"traceparent": "t"})
    assert hold.due() is None  # one of two held: it goes on
    assert hold.take(submission("high", job_id="api", priority=90), {})
    assert not hold.take(submission("late"), {})  # full
    assert [s.plan.eval_id for s in hold.held()] == ["low", "high"]
    due = hold.due()
    assert due is not None
    assert [(s.plan.eval_id, trace) for s, trace in due] == [
        ("high", {}),
        ("low", {"traceparent": "t"}),
    ]
    assert hold.due() is None and hold.held() == []  # over


def test_release_and_the_deadline_end_it_early() -> None:
    hold = PlanHold()
    hold.start(5, timeout_s=60)
    assert hold.take(submission("a"), {})
    assert hold.release() == 1
    assert [s.plan.eval_id for s, _ in hold.due() or []] == ["a"]
    assert hold.release() == 0
    hold.start(5, timeout_s=1e-9)  # past its deadline at once
    due = hold.due()
    assert due == []


def test_bad_arguments_and_a_second_hold_are_refused() -> None:
    hold = PlanHold()
    with pytest.raises(ValueError, match="count >= 1"):
        hold.start(0, timeout_s=1)
    with pytest.raises(ValueError, match="timeout_s > 0"):
        hold.start(1, timeout_s=0)
    hold.start(1, timeout_s=60)
    with pytest.raises(RuntimeError, match="already held"):
        hold.start(1, timeout_s=60)
