"""What a policy sees at an evaluation: the simulated target and its metrics.

Metrics a Nomad policy may query (by the check's `query`):
- utilisation (`avg_cpu-allocated`, `avg_cpu`, `utilisation`): demand / capacity x 100 over
  the ready allocations; no points while none is ready (Nomad's average of nothing);
- `rps_per_alloc`: demand / ready allocations (total demand while none is ready, so that
  target-value scales from zero to ceil(demand / target));
- `rps`: total demand.
Points are the evaluation samples within the query's window, the latest at `now`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from actors.experiments.core.capacity import CapacityModel
from contracts.autoscaling import MetricPoint, MetricQuery, MetricReadError


@dataclass(frozen=True, slots=True)
class Sample:
    time_s: float
    demand_rps: float
    ready: int
    count: int


def utilisation(sample: Sample, capacity: CapacityModel) -> float | None:
    if sample.ready == 0:
        return None
    return sample.demand_rps / capacity.capacity(sample.ready) * 100.0


def rps_per_alloc(sample: Sample, capacity: CapacityModel) -> float | None:
    return sample.demand_rps / max(sample.ready, 1)


def total_rps(sample: Sample, capacity: CapacityModel) -> float | None:
    return sample.demand_rps


MetricFn = Callable[[Sample, CapacityModel], "float | None"]
METRICS: dict[str, MetricFn] = {
    "avg_cpu-allocated": utilisation,
    "avg_cpu": utilisation,
    "utilisation": utilisation,
    "rps_per_alloc": rps_per_alloc,
    "rps": total_rps,
}


@dataclass(frozen=True, slots=True)
class SimState:
    now: float
    count: int  # allocations asked for (ready + starting)
    ready: int
    demand_rps: float
    last_busy_s: float | None  # the latest time demand was positive
    capacity: CapacityModel
    history: Sequence[Sample]  # evaluation samples, oldest first, the last one at `now`

    @property
    def starting(self) -> int:
        return self.count - self.ready

    def read(self, query: MetricQuery) -> list[MetricPoint]:
        """A MetricReader for the autoscaler's checks."""
        fn = METRICS.get(query.query)
        if fn is None:
            raise MetricReadError(f"the simulator has no metric {query.query!r}")
        start = query.end_s if query.instant else query.start_s
        points: list[MetricPoint] = []
        for sample in reversed(self.history):
            if sample.time_s > query.end_s:
                continue
            if sample.time_s < start:
                break
            value = fn(sample, self.capacity)
            if value is not None:
                points.append((sample.time_s, value))
        points.reverse()
        return points

    def mean_demand(self, window_s: float) -> float:
        """Mean of the demand samples in (now - window_s, now]."""
        # Newest first, stopping at the window's start: the work is the window's, not the run's.
        since = self.now - window_s
        values: list[float] = []
        for sample in reversed(self.history):
            if sample.time_s <= since:
                break
            if sample.time_s <= self.now:
                values.append(sample.demand_rps)
        values.reverse()
        return sum(values) / len(values) if values else 0.0
