"""The capacity model: what ready allocations serve, and what they leave unserved.

Each ready allocation serves `per_alloc_rps` requests per second (or, given a utilisation
target, `max_rps * target / 100`). Over a span of constant demand d and ready count n,
served = min(d, n * per_alloc_rps); the excess counts as SLO violations, in request-seconds
(requests not served in time) and violation-seconds (time with any excess). New allocations
become ready after a start delay: fixed, or drawn from samples with the run's seeded RNG;
a start from zero allocations is a cold start."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CapacityModel:
    per_alloc_rps: float

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
    """Served and violated demand, summed over segments."""

    segments: list[Segment] = field(default_factory=list)
    requests: float = 0.0
    served: float = 0.0
    violation_requests: float = 0.0
    violation_s: float = 0.0

    def add(self, segment: Segment) -> None:
        if segment.duration_s <= 0:
            return
        self.segments.append(segment)
        dt = segment.duration_s
        self.requests += segment.demand_rps * dt
        self.served += min(segment.demand_rps, segment.capacity_rps) * dt
        if segment.excess_rps > 0:
            self.violation_requests += segment.excess_rps * dt
            self.violation_s += dt
