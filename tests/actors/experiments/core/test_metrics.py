"""Run metrics on a hand-computed run."""

from __future__ import annotations

import pytest

from actors.experiments.core.capacity import Ledger, Segment
from actors.experiments.core.metrics import Scaling, compute_metrics


def test_metrics_on_a_hand_computed_run() -> None:
    ledger = Ledger()
    ledger.add(Segment(0, 10, demand_rps=10, capacity_rps=20, ready=2, count=2))
    ledger.add(Segment(10, 20, demand_rps=20, capacity_rps=10, ready=1, count=1))
    ledger.add(Segment(20, 30, demand_rps=0, capacity_rps=10, ready=1, count=1))
    actions = [Scaling(0, 1, 2), Scaling(10, 2, 1), Scaling(15, 1, 0), Scaling(20, 0, 1)]
    m = compute_metrics(ledger, actions, cold_starts=1)
    assert m.theta_u == pytest.approx(0.25)  # (20 - 10) / 20 over half the busy time
    assert m.theta_o == pytest.approx(0.5)  # (20 - 10) / 10 over the other half
    assert m.tau_u == pytest.approx(1 / 3) and m.tau_o == pytest.approx(2 / 3)
    assert m.slack == pytest.approx(0.25)  # (1 * 10 - 0.5 * 10) / 20
    assert m.slo_violation_min == pytest.approx(10 / 60) and m.violated_requests == 100
    assert m.allocation_hours == pytest.approx(40 / 3600) and m.requests == 300
    assert m.scaling_actions == 4 and m.reversals == 2 and m.cold_starts == 1
