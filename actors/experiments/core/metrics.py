"""Per-run metrics (SPEC RG elasticity metrics and the usual costs).

Supply and demand are in requests per second (capacity of the ready allocations against
demand), so normalising by demand makes them the same as in allocation units.
- θU, θO: time-weighted mean of (d - s)+ / d and (s - d)+ / d over the time with d > 0;
- τU, τO: shares of the whole run's time with s < d and s > d;
- slack: time-weighted mean of s / d - 1 over the time with d > 0;
- SLO-violation minutes: time with any unserved demand; violated requests: the excess;
- allocation-hours: allocations asked for (ready or starting) x time;
- scaling actions, and direction reversals (an action opposite to the previous one)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from actors.experiments.core.capacity import Ledger


@dataclass(frozen=True, slots=True)
class Scaling:
    time_s: float
    from_count: int
    to_count: int

    @property
    def up(self) -> bool:
        return self.to_count > self.from_count


@dataclass(frozen=True, slots=True)
class RunMetrics:
    theta_u: float
    theta_o: float
    tau_u: float
    tau_o: float
    slack: float
    slo_violation_min: float
    violated_requests: float
    requests: float
    cold_starts: int
    allocation_hours: float
    scaling_actions: int
    reversals: int


def reversals(actions: Sequence[Scaling]) -> int:
    return sum(1 for a, b in itertools.pairwise(actions) if a.up != b.up)


def compute_metrics(ledger: Ledger, actions: Sequence[Scaling], cold_starts: int) -> RunMetrics:
    total = busy = under = over = th_u = th_o = slack = alloc_s = 0.0
    for seg in ledger.segments:
        dt = seg.duration_s
        d, s = seg.demand_rps, seg.capacity_rps
        total += dt
        alloc_s += seg.count * dt
        if s < d:
            under += dt
        elif s > d:
            over += dt
        if d > 0:
            busy += dt
            th_u += max(0.0, d - s) / d * dt
            th_o += max(0.0, s - d) / d * dt
            slack += (s / d - 1.0) * dt
    return RunMetrics(
        theta_u=th_u / busy if busy else 0.0,
        theta_o=th_o / busy if busy else 0.0,
        tau_u=under / total if total else 0.0,
        tau_o=over / total if total else 0.0,
        slack=slack / busy if busy else 0.0,
        slo_violation_min=ledger.violation_s / 60.0,
        violated_requests=ledger.violation_requests,
        requests=ledger.requests,
        cold_starts=cold_starts,
        allocation_hours=alloc_s / 3600.0,
        scaling_actions=len(actions),
        reversals=reversals(actions),
    )
