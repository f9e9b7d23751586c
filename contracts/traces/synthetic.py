"""Synthetic demand shapes sampled every `step_s` seconds over `duration_s`, with optional
multiplicative noise (each point times a factor uniform in [1 - noise, 1 + noise], from
`random.Random(seed)`): the same arguments and seed give the same series.

- `step`: `base`, then `peak` from `at_s` on;
- `ramp`: `start` until `at_s`, linear to `end` over `ramp_s`, then `end`;
- `spike`: `base`, `peak` during [`at_s`, `at_s + width_s`);
- `diurnal`: `mean + amplitude * sin(2 pi (t - phase_s) / period_s)`, floored at 0;
- `poisson`: arrivals of a Poisson process of `rate_per_s`, counted per `step_s` bucket
  (`poisson_arrivals` gives the arrival times).
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable

from contracts.errors import ValidationError
from contracts.traces.series import MAX_POINTS, Series

# -- the shapes, as values at time t (the mock load model reads these too) -------------------


def step_value(t: float, base: float, peak: float, at_s: float) -> float:
    return peak if t >= at_s else base


def ramp_value(t: float, start: float, end: float, at_s: float, ramp_s: float) -> float:
    if t < at_s:
        return start
    if ramp_s == 0 or t >= at_s + ramp_s:
        return end
    return start + (end - start) * (t - at_s) / ramp_s


def spike_value(t: float, base: float, peak: float, at_s: float, width_s: float) -> float:
    return peak if at_s <= t < at_s + width_s else base


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValidationError(f"{name}: expected a number {bound}, got {value!r}")


def _sample(
    name: str,
    shape: Callable[[float], float],
    duration_s: float,
    step_s: float,
    noise: float,
    seed: int,
) -> Series:
    _check("duration_s", duration_s)
    _check("step_s", step_s, positive=True)
    if not 0 <= noise < 1:
        raise ValidationError(f"noise: expected a fraction in [0, 1), got {noise!r}")
    n = math.floor(duration_s / step_s) + 1
    if n > MAX_POINTS:
        raise ValidationError(f"{name}: {n} points, more than the {MAX_POINTS} a trace may have")
    rng = random.Random(seed)
    offsets = array("d", (i * step_s for i in range(n)))
    values = array("d")
    for t in offsets:
        value = shape(t)
        if noise:
            value *= rng.uniform(1 - noise, 1 + noise)
        values.append(max(value, 0.0))
    return Series(f"synthetic:{name}", offsets, values)


def step(
    base: float,
    peak: float,
    at_s: float,
    *,
    duration_s: float,
    step_s: float = 60.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Series:
    return _sample(
        "step", lambda t: step_value(t, base, peak, at_s), duration_s, step_s, noise, seed
    )


def ramp(
    start: float,
    end: float,
    at_s: float,
    ramp_s: float,
    *,
    duration_s: float,
    step_s: float = 60.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Series:
    _check("ramp_s", ramp_s)
    return _sample(
        "ramp",
        lambda t: ramp_value(t, start, end, at_s, ramp_s),
        duration_s,
        step_s,
        noise,
        seed,
    )


def spike(
    base: float,
    peak: float,
    at_s: float,
    width_s: float,
    *,
    duration_s: float,
    step_s: float = 60.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Series:
    _check("width_s", width_s)
    return _sample(
        "spike",
        lambda t: spike_value(t, base, peak, at_s, width_s),
        duration_s,
        step_s,
        noise,
        seed,
    )


def diurnal(
    mean: float,
    amplitude: float,
    *,
    period_s: float = 86_400.0,
    phase_s: float = 0.0,
    duration_s: float,
    step_s: float = 60.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Series:
    _check("period_s", period_s, positive=True)
    return _sample(
        "diurnal",
        lambda t: mean + amplitude * math.sin(2 * math.pi * (t - phase_s) / period_s),
        duration_s,
        step_s,
        noise,
        seed,
    )


def poisson_arrivals(rate_per_s: float, duration_s: float, seed: int = 0) -> array[float]:
    """Arrival times in [0, duration_s) of a Poisson process (exponential gaps)."""
    _check("rate_per_s", rate_per_s)
    _check("duration_s", duration_s)
    times: array[float] = array("d")
    if rate_per_s == 0:
        return times
    rng = random.Random(seed)
    t = rng.expovariate(rate_per_s)
    while t < duration_s:
        if len(times) == MAX_POINTS:
            raise ValidationError(f"poisson: more than the {MAX_POINTS} arrivals a trace may have")
        times.append(t)
        t += rng.expovariate(rate_per_s)
    return times


def poisson(
    rate_per_s: float,
    *,
    duration_s: float,
    step_s: float = 1.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Series:
    """Arrivals per `step_s` bucket; buckets start at 0, step_s, ... up to duration_s."""
    _check("step_s", step_s, positive=True)
    _check("duration_s", duration_s)
    counts = [0.0] * (math.floor(duration_s / step_s) + 1)
    for t in poisson_arrivals(rate_per_s, duration_s, seed):
        counts[int(t // step_s)] += 1.0
    points = iter(counts)
    return _sample("poisson", lambda _t: next(points), duration_s, step_s, noise, seed + 1)
