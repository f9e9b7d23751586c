"""Synthetic shapes: values, noise bounds, determinism per seed."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from contracts.errors import ValidationError
from contracts.traces.synthetic import diurnal, poisson, poisson_arrivals, ramp, spike, step


def test_step_ramp_spike_values() -> None:
    s = step(1, 5, 120, duration_s=300)
    assert list(s.offsets) == [0, 60, 120, 180, 240, 300] and list(s.values) == [1, 1, 5, 5, 5, 5]
    assert s.path == "synthetic:step" and s.value_at(150) == 5
    r = ramp(0, 100, 60, 120, duration_s=240)
    assert list(r.values) == [0, 0, 50, 100, 100]
    p = spike(2, 9, 60, 60, duration_s=180)
    assert list(p.values) == [2, 9, 2, 2]


def test_diurnal_sine() -> None:
    d = diurnal(10, 5, period_s=240, duration_s=240)
    assert list(d.values) == pytest.approx([10, 15, 10, 5, 10])
    floored = diurnal(1, 5, period_s=240, duration_s=240)
    assert floored.values[3] == 0


def test_noise_is_multiplicative_bounded_and_seeded() -> None:
    a = step(100, 100, 0, duration_s=6000, noise=0.1, seed=7)
    assert all(90 <= v <= 110 for v in a.values) and len(set(a.values)) > 90
    assert list(a.values) == list(step(100, 100, 0, duration_s=6000, noise=0.1, seed=7).values)
    assert list(a.values) != list(step(100, 100, 0, duration_s=6000, noise=0.1, seed=8).values)


def test_poisson_is_seeded_and_has_its_rate() -> None:
    times = poisson_arrivals(2.0, 10_000, seed=3)
    assert list(times) == list(poisson_arrivals(2.0, 10_000, seed=3))
    assert math.isclose(len(times) / 10_000, 2.0, rel_tol=0.03)
    assert all(0 <= t < 10_000 for t in times) and list(times) == sorted(times)
    counts = poisson(2.0, duration_s=10_000, step_s=10, seed=3)
    assert sum(counts.values) == len(times) and len(counts) == 1001
    assert list(counts.values) == list(poisson(2.0, duration_s=10_000, step_s=10, seed=3).values)
    assert len(poisson_arrivals(0, 100)) == 0


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: step(1, 2, 0, duration_s=10, step_s=0), "step_s: expected a number > 0, got 0"),
        (lambda: step(1, 2, 0, duration_s=-1), "duration_s: expected a number >= 0, got -1"),
        (lambda: step(1, 2, 0, duration_s=10, noise=1), "noise: expected a fraction in [0, 1)"),
        (lambda: poisson(-1, duration_s=10), "rate_per_s: expected a number >= 0, got -1"),
        (lambda: diurnal(1, 1, period_s=0, duration_s=1), "period_s: expected a number > 0"),
    ],
)
def test_bad_parameters_name_the_field(make: Callable[[], object], problem: str) -> None:
    with pytest.raises(ValidationError) as error:
        make()
    assert problem in str(error.value)
