"""The decision log: the last N evaluations per policy, newest first, each Scale call's end
recorded once, and the JSON `explain` reads (from a real handler's decisions)."""

from __future__ import annotations

from collections.abc import Sequence

from actors.autoscaler.core.decisions import DecisionLog, to_json
from actors.autoscaler.core.handler import PolicyHandler
from contracts.autoscaling import (
    Check,
    Decision,
    MetricPoint,
    MetricQuery,
    Outcome,
    Policy,
    StrategySpec,
    TargetSpec,
    TargetStatus,
    TargetValueConfig,
)

T0 = 1_700_000_000.0


def decision(n: int, policy_id: str = "p", scale_due: bool = False) -> Decision:
    return Decision(
        policy_id=policy_id,
        decision_id=f"{policy_id}:{n}",
        time_s=T0 + n,
        outcome=Outcome.SCALE if scale_due else Outcome.NO_ACTION,
        reason=str(n),
        scale_due=scale_due,
    )


def test_each_policy_keeps_its_last_decisions_newest_first() -> None:
    log = DecisionLog(keep=3)
    for n in range(5):
        log.add(decision(n))
    log.add(decision(0, policy_id="q"))
    assert [r.decision.reason for r in log.last("p")] == ["4", "3", "2"]
    assert [r.decision.reason for r in log.last("p", 1)] == ["4"]
    assert [r.decision.policy_id for r in log.last("q")] == ["q"]
    assert log.last("ghost") == [] and log.last("p", 0) == []
    log.forget("p")
    assert log.last("p") == []


def test_a_scale_call_is_pending_until_settled_once() -> None:
    log = DecisionLog(keep=2, keep_scales=1)
    record = log.add(decision(1, scale_due=True))
    assert record.scale is not None and record.scale.status == "pending"
    assert log.add(decision(2)).scale is None
    assert log.settle("p:1", True, eval_id="e1", index=9)
    assert not log.settle("p:1", False, error="late")  # answered already
    assert to_json(log.last("p")[1])["Scale"] == {
        "Status": "ok",
        "Error": "",
        "EvalID": "e1",
        "Index": 9,
    }
    log.add(decision(3, scale_due=True))
    log.add(decision(4, scale_due=True))  # only one Scale call is kept: 3 is gone
    assert not log.settle("p:3", False, error="refused")
    assert log.settle("p:4", False, error="refused")


def test_scale_calls_stay_listed_under_many_decisions_that_changed_nothing() -> None:
    log = DecisionLog(keep=3, keep_scales=2)
    for n in range(10):
        log.add(decision(n, scale_due=n in (1, 4, 6)))
    assert [r.decision.reason for r in log.last("p")] == ["9", "8", "7", "6", "4"]
    assert [r.decision.reason for r in log.last("p", 4)] == ["9", "8", "7", "6"]


def test_the_json_of_a_real_decision_names_checks_values_proposals_and_winner() -> None:
    check = Check(
        name="cpu",
        strategy=StrategySpec("target-value", TargetValueConfig(target=50.0)),
        query="avg_cpu",
    )
    policy = Policy(
        min=1,
        max=3,
        checks=(check,),
        target=TargetSpec(kind="job-group", job="web", group="api"),
    )

    def reader(query: MetricQuery) -> Sequence[MetricPoint]:
        return [(T0 - 1, 200.0)]

    handler = PolicyHandler("p", policy)
    made = handler.tick(T0, TargetStatus(ready=True, count=2), reader)
    body = to_json(DecisionLog().add(made))
    assert body["Outcome"] == "scale" and body["ScaleDue"] is True
    assert (body["CurrentCount"], body["Winner"], body["Capped"]) == (2, "cpu", True)
    (checked,) = body["Checks"]
    assert checked["Query"] == {
        "Source": "drover",
        "Query": "avg_cpu",
        "Start": T0 - 60,
        "End": T0,
        "Instant": False,
    }
    assert (checked["Value"], checked["PointsRead"], checked["Error"]) == (200.0, 1, "")
    assert checked["Action"]["Count"] == 3 and checked["Action"]["Direction"] == "up"
    assert body["Action"]["Meta"]["nomad_autoscaler.count.original"] == 8
    assert body["Action"]["Reason"] == "capped count from 8 to 3 to stay within limits"
    assert body["Scale"] == {"Status": "pending", "Error": "", "EvalID": "", "Index": 0}
