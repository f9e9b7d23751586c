"""The capacity model: what ready allocations serve, and what they leave unserved.

Each ready allocation serves `per_alloc_rps` requests per second (or, given a utilisation
target, `max_rps * target / 100`). Over a span of constant demand d and ready count n,
served = min(d, n * per_alloc_rps); the excess counts as SLO violations, in request-seconds
(requests not served in time) and violation-seconds (time with any excess). New allocations
become ready after a start delay: fixed, or drawn from samples with the run's seeded RNG;
a start from zero allocations is a cold start.

With a `QueueModel` the excess waits instead of being lost: a fluid FIFO queue, filled at
the demand's rate and drained at the capacity's, in which a request arriving when the backlog
is b waits b / capacity. A request that waits longer than `slo_wait_s` (or arrives while no
allocation is ready) violates the SLO; the ledger keeps the mean wait and the backlog. Within
a segment the backlog is linear (until it empties), so every integral is exact."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class QueueModel:
    """Requests beyond capacity queue; waiting longer than `slo_wait_s` violates the SLO."""

    slo_wait_s: float

    def __post_init__(self) -> None:
        if self.slo_wait_s < 0:
            raise ValueError("slo_wait_s cannot be negative")


@dataclass(frozen=True, slots=True)
class CapacityModel:
    per_alloc_rps: float
    queue: QueueModel | None = None  # None: the excess is lost (counted as violations)

    def __post_init__(self) -> None:
        if self.per_alloc_rps <= 0:
            raise ValueError("per_alloc_rps must be positive")

    @classmethod
    def at_utilisation(cls, max_rps: float, target_pct: float) -> CapacityModel:
        """An allocation that saturates at `max_rps`, meeting its SLO up to `target_pct`."""
        return cls(max_rps * target_pct / 100.0)

    def capacity(self, ready: int) -> float:
        return ready * self.per_alloc_rps


@dataclass(frozen=True, slots=True)
class StartDelay:
    """Seconds from a scale-up to the new allocation being ready."""

    fixed_s: float = 0.0
    samples: tuple[float, ...] = ()

    @classmethod
    def fixed(cls, seconds: float) -> StartDelay:
        return cls(fixed_s=float(seconds))

    @classmethod
    def sampled(cls, samples: Sequence[float]) -> StartDelay:
        if not samples:
            raise ValueError("no start-delay samples")
        return cls(samples=tuple(float(s) for s in samples))

    def draw(self, rng: random.Random) -> float:
        return rng.choice(self.samples) if self.samples else self.fixed_s


@dataclass(frozen=True, slots=True)
class Segment:
    """[start_s, end_s) with constant demand and allocations."""

    start_s: float
    end_s: float
    demand_rps: float
    capacity_rps: float
    ready: int
    count: int

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def excess_rps(self) -> float:
        return max(0.0, self.demand_rps - self.capacity_rps)


@dataclass(slots=True)
class Ledger:
    """Served and violated demand, summed over segments (queued, given a `queue`)."""

    segments: list[Segment] = field(default_factory=list)
    queue: QueueModel | None = None
    requests: float = 0.0
    served: float = 0.0
    violation_requests: float = 0.0
    violation_s: float = 0.0
    backlog: float = 0.0  # requests waiting at the end of the last segment
    max_backlog: float = 0.0
    wait_request_s: float = 0.0  # the sum of every request's wait

    def add(self, segment: Segment) -> None:
        if segment.duration_s <= 0:
            return
        self.segments.append(segment)
        dt = segment.duration_s
        self.requests += segment.demand_rps * dt
        if self.queue is not None:
            self._queued(segment.demand_rps, segment.capacity_rps, dt, self.queue.slo_wait_s)
            return
        self.served += min(segment.demand_rps, segment.capacity_rps) * dt
        if segment.excess_rps > 0:
            self.violation_requests += segment.excess_rps * dt
            self.violation_s += dt

    @property
    def mean_wait_s(self) -> float:
        return self.wait_request_s / self.requests if self.requests else 0.0

    def _queued(self, d: float, c: float, dt: float, slo_s: float) -> None:
        b0 = self.backlog
        if c <= 0:  # nothing ready: every arrival waits past any SLO
            self.backlog = b0 + d * dt
            self.max_backlog = max(self.max_backlog, self.backlog)
            if d > 0:
                self.violation_requests += d * dt
                self.violation_s += dt
            return
        net = d - c
        # The backlog b(t) = b0 + net * t, until it empties (net < 0) at t = b0 / -net.
        busy = dt if net >= 0 else min(dt, b0 / -net)
        b_end = max(0.0, b0 + net * busy)  # zero when it emptied
        self.served += c * busy + min(d, c) * (dt - busy)
        # Waits: a request arriving at t waits b(t) / c; b is linear over [0, busy].
        self.wait_request_s += d * (b0 + b_end) / 2.0 * busy / c
        late = _late_time(b0, net, busy, slo_s * c)
        self.violation_requests += d * late
        if d > 0:
            self.violation_s += late
        self.backlog = b_end
        self.max_backlog = max(self.max_backlog, b0, b_end)


def _late_time(b0: float, net: float, busy: float, limit: float) -> float:
    """How long within [0, busy] the linear backlog b0 + net * t stays above `limit`."""
    if net == 0:
        return busy if b0 > limit else 0.0
    crossing = (limit - b0) / net  # where b(t) = limit
    if net > 0:
        return max(0.0, busy - max(0.0, crossing))
    return min(busy, max(0.0, crossing))
