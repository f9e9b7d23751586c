"""The demand a run replays: requests per second at simulated time t.

A demand is anything with `rate(t)` and `span_s`. A step-hold series also knows where its
rate changes (`change_points`), so the simulator accounts between changes exactly; a
callable demand is sampled at the simulator's step boundaries."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class Demand(Protocol):
    @property
    def span_s(self) -> float: ...

    def rate(self, t: float) -> float: ...


@runtime_checkable
class SteppedDemand(Protocol):
    @property
    def span_s(self) -> float: ...

    def rate(self, t: float) -> float: ...

    def change_points(self, start: float, end: float) -> Sequence[float]: ...


@dataclass(frozen=True, slots=True)
class CallableDemand:
    fn: Callable[[float], float]
    span_s: float

    def rate(self, t: float) -> float:
        return max(0.0, float(self.fn(t)))


@dataclass(frozen=True, slots=True)
class StepHoldDemand:
    """`values[i]` holds from `times[i]` until `times[i + 1]`; zero before the first time
    and from `span_s` on."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    span_s: float

    def rate(self, t: float) -> float:
        if t >= self.span_s:
            return 0.0
        i = bisect.bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else 0.0

    def change_points(self, start: float, end: float) -> Sequence[float]:
        """The times in (start, end) where the rate may change."""
        lo = bisect.bisect_right(self.times, start)
        hi = bisect.bisect_left(self.times, end)
        points = list(self.times[lo:hi])
        if start < self.span_s < end:
            points.append(self.span_s)
        return points


def from_callable(fn: Callable[[float], float], span_s: float) -> CallableDemand:
    return CallableDemand(fn, float(span_s))


def from_series(
    times: Sequence[float], values: Sequence[float], span_s: float | None = None
) -> StepHoldDemand:
    """A step-hold series; `span_s` defaults to the last time plus the last step."""
    if len(times) != len(values) or not times:
        raise ValueError("times and values must be non-empty and of equal length")
    ts = tuple(float(t) for t in times)
    if any(b <= a for a, b in itertools.pairwise(ts)):
        raise ValueError("times must increase strictly")
    if any(v < 0 for v in values):
        raise ValueError("demand cannot be negative")
    if span_s is None:
        step = ts[-1] - ts[-2] if len(ts) > 1 else 1.0
        span_s = ts[-1] + step
    return StepHoldDemand(ts, tuple(float(v) for v in values), float(span_s))
