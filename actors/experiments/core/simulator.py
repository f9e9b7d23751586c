"""The discrete-event run: demand -> a policy's evaluations -> allocations -> capacity.

Time advances from one evaluation to the next (the policy's interval). Between two
evaluations the run is split exactly where something changes: an allocation becomes ready
at its start time, or a step-hold demand changes its rate; each piece is accounted by the
capacity model. A policy that `wakes_on_demand` also decides at the moment demand arrives
while it has no allocation (scale from zero at once). A decision sets the target count at
once: new allocations start with a start delay (a start from zero is a cold start);
removals take starting allocations first, the newest first. Same inputs and seed, same run.

Where the allocations run is a `ClusterModel` (`cluster.py`): by default room for all of
them; a node pool adds node provisioning, a fleet limit and blocked allocations, and its
own points where the run splits (a node ready, an idle node removed), so the accounting
stays exact.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from actors.experiments.core.capacity import CapacityModel, Ledger, Segment, StartDelay
from actors.experiments.core.cluster import Allocations, ClusterModel, ClusterStats, Unlimited
from actors.experiments.core.demand import Demand, SteppedDemand
from actors.experiments.core.metrics import RunMetrics, Scaling, compute_metrics
from actors.experiments.core.policies import SimPolicy
from actors.experiments.core.state import Sample, SimState


@dataclass(slots=True)
class RunResult:
    until_s: float
    ledger: Ledger
    samples: list[Sample]
    actions: list[Scaling]
    cold_starts: int
    cluster: ClusterStats | None = None  # with a cluster model: nodes and blocked allocations

    @property
    def metrics(self) -> RunMetrics:
        return compute_metrics(self.ledger, self.actions, self.cold_starts)

    def counts(self) -> list[tuple[float, int]]:
        """(evaluation time, allocations asked for) at each evaluation."""
        return [(s.time_s, s.count) for s in self.samples]


@dataclass(slots=True)
class _Run:
    demand: Demand
    policy: SimPolicy
    capacity: CapacityModel
    start_delay: StartDelay
    rng: random.Random
    allocs: Allocations = field(default_factory=Unlimited)
    ledger: Ledger = field(default_factory=Ledger)
    samples: list[Sample] = field(default_factory=list)
    actions: list[Scaling] = field(default_factory=list)
    cold_starts: int = 0
    last_busy_s: float | None = None
    stepped: bool = False

    def __post_init__(self) -> None:
        self.stepped = isinstance(self.demand, SteppedDemand)

    def evaluate(self, t: float) -> None:
        rate = self.demand.rate(t)
        if rate > 0:
            self.last_busy_s = t
        sample = Sample(t, rate, self.allocs.ready(t), self.allocs.count)
        self.samples.append(sample)
        state = SimState(
            now=t,
            count=sample.count,
            ready=sample.ready,
            demand_rps=rate,
            last_busy_s=self.last_busy_s,
            capacity=self.capacity,
            history=self.samples,
        )
        target = self.policy.decide(t, state)
        if target is not None:
            self.apply(t, max(0, target))

    def apply(self, t: float, target: int) -> None:
        count = self.allocs.count
        if target == count:
            return
        self.actions.append(Scaling(t, count, target))
        if target > count and count == 0:
            self.cold_starts += 1
        # Starting allocations go first (the latest ready time first), then ready ones.
        self.allocs.scale(t, target, self._delay)

    def _delay(self) -> float:
        return self.start_delay.draw(self.rng)

    def next_point(self, t: float, end: float) -> float:
        """The first time in (t, end] where an allocation becomes ready, the cluster changes
        or demand changes."""
        nxt = self.allocs.next_point(t, end)
        if self.stepped:
            changes = self.demand.change_points(t, nxt)  # type: ignore[attr-defined]
            if changes:
                nxt = changes[0]
        return nxt

    def advance(self, t: float, end: float) -> None:
        prev = t
        while prev < end:
            p = self.next_point(prev, end)
            rate = self.demand.rate(prev)
            allocs = self.allocs
            ready = allocs.ready(prev)
            cap = self.capacity.capacity(ready)
            self.ledger.add(Segment(prev, p, rate, cap, ready, allocs.count))
            allocs.step(prev, p)
            if rate > 0:
                self.last_busy_s = p
            prev = p
            if (
                p < end
                and self.policy.wakes_on_demand
                and not allocs.count
                and self.demand.rate(p) > 0
            ):
                self.evaluate(p)


def simulate(
    demand: Demand,
    policy: SimPolicy,
    *,
    interval_s: float | None = None,
    start_count: int = 0,
    start_delay: StartDelay | float = 0.0,
    per_alloc_rps: float | CapacityModel = 1.0,
    seed: int = 0,
    until_s: float | None = None,
    cluster: ClusterModel | None = None,
) -> RunResult:
    """Replay `demand` from 0 to `until_s` (default its span) against `policy`, evaluating
    every `interval_s` (default the policy's). `start_count` allocations are ready at 0.
    `cluster` places the allocations on nodes (default: room for all, none blocked)."""
    step = policy.interval_s if interval_s is None else interval_s
    if step <= 0:
        raise ValueError("the evaluation interval must be positive")
    end = demand.span_s if until_s is None else until_s
    delay = start_delay if isinstance(start_delay, StartDelay) else StartDelay.fixed(start_delay)
    capacity = (
        per_alloc_rps
        if isinstance(per_alloc_rps, CapacityModel)
        else CapacityModel(float(per_alloc_rps))
    )
    allocs = Unlimited(start_count) if cluster is None else cluster.start(start_count)
    run = _Run(demand, policy, capacity, delay, random.Random(seed), allocs)
    run.ledger = Ledger(queue=capacity.queue)  # a queue keeps the excess waiting
    k = 0
    while k * step < end:
        t = k * step
        run.evaluate(t)
        run.advance(t, min((k + 1) * step, end))
        k += 1
    return RunResult(end, run.ledger, run.samples, run.actions, run.cold_starts, allocs.stats())
