"""The simulator's error, measured: a live replay's count trajectory against the simulated one.

Both trajectories are step functions of simulated time: (time, count) points, each count holding
until the next point. Over [0, until_s] the comparison reports the time-weighted mean absolute
difference of the counts, the share of the time they differ, the largest difference, each
side's scaling actions and allocation-hours, and the relative error of the allocation-hours
(what a cost comparison between policies would be off by)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

Trajectory = Sequence[tuple[float, int]]


@dataclass(frozen=True, slots=True)
class TrajectoryError:
    until_s: float
    mean_abs_count_error: float
    time_share_differing: float
    max_abs_count_error: int
    live_actions: int
    sim_actions: int
    live_allocation_hours: float
    sim_allocation_hours: float

    @property
    def allocation_hours_error(self) -> float:
        """(live - simulated) / simulated allocation-hours; 0 when both are 0."""
        if self.sim_allocation_hours == 0:
            return 0.0 if self.live_allocation_hours == 0 else float("inf")
        return (self.live_allocation_hours - self.sim_allocation_hours) / self.sim_allocation_hours


def _normalised(points: Trajectory, until_s: float) -> list[tuple[float, int]]:
    """Sorted, the count before the first point being the first point's, clipped to
    [0, until_s], one point per time (the last one given wins)."""
    if not points:
        raise ValueError("a trajectory needs at least one point")
    ordered = sorted(points, key=lambda p: p[0])
    out: list[tuple[float, int]] = [(0.0, ordered[0][1])]
    for t, count in ordered:
        if t >= until_s:
            break
        t = max(t, 0.0)
        if out and out[-1][0] == t:
            out[-1] = (t, count)
        else:
            out.append((t, count))
    return out


def actions(points: Trajectory) -> int:
    """Changes of count along a trajectory."""
    ordered = sorted(points, key=lambda p: p[0])
    return sum(1 for a, b in itertools.pairwise(ordered) if a[1] != b[1])


def compare(live: Trajectory, simulated: Trajectory, until_s: float) -> TrajectoryError:
    if not until_s > 0:
        raise ValueError("until_s must be positive")
    a, b = _normalised(live, until_s), _normalised(simulated, until_s)
    times = sorted({t for t, _ in a} | {t for t, _ in b})
    ia = ib = 0
    abs_area = differing = live_area = sim_area = 0.0
    worst = 0
    for k, t in enumerate(times):
        end = times[k + 1] if k + 1 < len(times) else until_s
        while ia + 1 < len(a) and a[ia + 1][0] <= t:
            ia += 1
        while ib + 1 < len(b) and b[ib + 1][0] <= t:
            ib += 1
        ca, cb = a[ia][1], b[ib][1]
        dt = end - t
        diff = abs(ca - cb)
        abs_area += diff * dt
        live_area += ca * dt
        sim_area += cb * dt
        if diff:
            differing += dt
            worst = max(worst, diff)
    return TrajectoryError(
        until_s=until_s,
        mean_abs_count_error=abs_area / until_s,
        time_share_differing=differing / until_s,
        max_abs_count_error=worst,
        live_actions=actions(a),
        sim_actions=actions(b),
        live_allocation_hours=live_area / 3600.0,
        sim_allocation_hours=sim_area / 3600.0,
    )
