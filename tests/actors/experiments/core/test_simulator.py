"""The simulator: Nomad policies exactly as the live handler, capacity and violations,
start delays, scale to zero with cold starts, HPA stabilisation, dstack, determinism."""

from __future__ import annotations

from actors.autoscaler.core.handler import PolicyHandler
from actors.experiments.core.capacity import StartDelay
from actors.experiments.core.demand import from_callable, from_series
from actors.experiments.core.metrics import Scaling
from actors.experiments.core.policies import (
    DstackPolicy,
    KeepAlivePolicy,
    NomadPolicy,
    hpa_like,
    nomad_policy_dict,
)
from actors.experiments.core.simulator import simulate
from actors.experiments.core.state import SimState
from contracts.autoscaling import MetricPoint, MetricQuery, TargetStatus, parse_group_policy


class Hold:
    interval_s = 10.0
    wakes_on_demand = False

    def __init__(self, plan: dict[float, int] | None = None) -> None:
        self.plan = plan or {}

    def decide(self, now: float, state: SimState) -> int | None:
        return self.plan.get(now)


def tv_body(target: float, cooldown: str = "1m") -> dict[str, object]:
    return nomad_policy_dict(
        query="rps_per_alloc",
        strategy="target-value",
        settings={"target": target},
        cooldown=cooldown,
    )


STEP = from_series([0, 60, 80, 300], [5, 40, 80, 10], span_s=400)


def test_target_value_matches_the_live_handler_driven_directly() -> None:
    policy = NomadPolicy.from_dict(tv_body(10), min=1, max=20)
    result = simulate(STEP, policy, start_count=1, per_alloc_rps=10)

    handler = PolicyHandler("direct", parse_group_policy(tv_body(10), min=1, max=20, where="x"))
    count, expected = 1, []
    for k in range(40):
        now = k * 10.0
        expected.append((now, count))
        value = STEP.rate(now) / count

        def reader(q: MetricQuery, v: float = value, t: float = now) -> list[MetricPoint]:
            return [(t, v)]

        decision = handler.tick(now, TargetStatus(ready=True, count=count), reader)
        if decision.scale_due and decision.action is not None:
            handler.scale_succeeded(decision.decision_id, now)
            count = decision.action.count
    assert result.counts() == expected
    # 60 s: 40 rps on 1 -> 4; 80 rps at 80 s waits out the 1 min cooldown (until 130 s).
    assert result.actions == [Scaling(60, 1, 4), Scaling(130, 4, 8), Scaling(300, 8, 1)]


def test_capacity_and_violation_accounting() -> None:
    demand = from_series([0, 10], [5, 25], span_s=20)
    result = simulate(demand, Hold(), start_count=2, per_alloc_rps=10)
    ledger = result.ledger
    assert ledger.requests == 300 and ledger.served == 250
    assert ledger.violation_requests == 50 and ledger.violation_s == 10
    assert result.metrics.slo_violation_min == 10 / 60


def test_start_delay_and_cold_start() -> None:
    demand = from_callable(lambda t: 25.0, span_s=30)
    result = simulate(demand, Hold({0.0: 3}), start_delay=15, per_alloc_rps=10)
    assert [(s.start_s, s.end_s, s.ready) for s in result.ledger.segments] == [
        (0, 10, 0),
        (10, 15, 0),
        (15, 20, 3),
        (20, 30, 3),
    ]
    assert result.ledger.violation_requests == 25 * 15 and result.cold_starts == 1


def test_keep_alive_scales_to_zero_and_wakes_on_demand() -> None:
    demand = from_series([0, 30, 705, 715], [1, 0, 1, 0], span_s=1000)
    result = simulate(demand, KeepAlivePolicy(keep_alive_s=600), start_delay=2)
    assert result.actions == [Scaling(0, 0, 1), Scaling(630, 1, 0), Scaling(705, 0, 1)]
    assert result.cold_starts == 2
    assert result.ledger.violation_requests == 4  # 2 s of 1 rps at each cold start


def test_hpa_stabilisation_holds_the_count_through_a_short_dip() -> None:
    dip = from_series([0, 300, 420], [40, 10, 40], span_s=900)
    hpa = simulate(dip, hpa_like(query="rps_per_alloc", target=10, min=1, max=10), start_count=4)
    assert hpa.actions == [] and {c for _, c in hpa.counts()} == {4}
    plain = NomadPolicy.from_dict(tv_body(10, cooldown="15s"), min=1, max=10)
    assert simulate(dip, plain, start_count=4, per_alloc_rps=10).actions[0] == Scaling(300, 4, 1)


def test_hpa_scales_down_after_the_window() -> None:
    low = from_series([0, 100], [40, 10], span_s=900)
    hpa = simulate(low, hpa_like(query="rps_per_alloc", target=10, min=1, max=10), start_count=4)
    (action,) = hpa.actions
    # the last recommendation of 4 (90 s) leaves the 300 s window after 390 s
    assert action == Scaling(390, 4, 1)


def test_dstack_scales_from_zero_at_once_then_waits_five_minutes() -> None:
    demand = from_series([0, 100, 200], [0, 50, 100], span_s=700)
    result = simulate(demand, DstackPolicy(target_rps=10, min=0, max=20))
    assert result.actions == [Scaling(100, 0, 5), Scaling(400, 5, 10)]


def test_same_seed_same_run() -> None:
    demand = from_series([0, 50, 300, 500], [3, 60, 0, 20], span_s=900)
    delays = StartDelay.sampled([1, 7, 30, 90])

    def run(seed: int) -> tuple[object, ...]:
        policy = NomadPolicy.from_dict(tv_body(10, cooldown="20s"), min=0, max=20)
        r = simulate(demand, policy, start_delay=delays, per_alloc_rps=10, seed=seed)
        return (r.actions, r.ledger.segments, r.metrics)

    assert run(3) == run(3)
