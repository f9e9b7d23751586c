"""The hybrid histogram policy: its windows from a hand-built histogram, its fallbacks, its
bounded state, and both faces: the fluid simulator's policy and the per-request keep-alive,
each learning a burst every 30 minutes and pre-warming before it, where a fixed 10-minute
keep-alive has a cold start every burst."""

from __future__ import annotations

import pytest

from actors.experiments.core.demand import from_series
from actors.experiments.core.faas import TraceService, Window, simulate_faas
from actors.experiments.core.hybrid import (
    HybridHistogramPolicy,
    HybridKeepAlive,
    IdleHistogram,
    Pattern,
)
from actors.experiments.core.policies import KeepAlivePolicy
from actors.experiments.core.simulator import simulate

PERIOD, BURST, BURSTS = 1800.0, 60.0, 12


def test_windows_from_a_hand_built_histogram() -> None:
    h = IdleHistogram(range_s=3600.0)  # 60 bins of 60 s
    for idle_s, times in ((125.0, 10), (600.0, 85), (1500.0, 5)):
        for _ in range(times):
            h.record(idle_s)
    assert h.pattern is Pattern.CERTAIN and h.cv > 2.0
    # Head 5 %: bin 2 (10 of 100); tail 99 %: bin 25 (bin 10 reaches 95 only).
    assert h.percentile_bins(0.05, 0.99) == [2, 25]
    w = h.window()
    assert w.prewarm_s == pytest.approx(2 * 60 * 0.9)  # 108 s
    # Unloaded (25 + 1) x 60 x 1.1 = 1,716 s after the idle start: kept 1,608 s after the load.
    assert w.prewarm_s + w.keep_alive_s == pytest.approx(1716.0)
    # A head in bin 0: no pre-warm, kept from the idle start.
    h0 = IdleHistogram(range_s=3600.0)
    for _ in range(20):
        h0.record(30.0)
    w0 = h0.window()
    assert w0.prewarm_s == 0.0 and w0.keep_alive_s == pytest.approx(66.0)


def test_not_representative_falls_back_to_the_range() -> None:
    few = IdleHistogram(range_s=3600.0)
    for _ in range(4):  # fewer than min_samples
        few.record(600.0)
    assert few.pattern is Pattern.UNCERTAIN and few.window() == Window(0.0, 3600.0)
    spread = IdleHistogram(range_s=3600.0)
    for b in range(60):  # one idle time in every bin: CV 0
        spread.record(b * 60.0 + 1.0)
    assert spread.cv == pytest.approx(0.0) and spread.window() == Window(0.0, 3600.0)


def test_out_of_bounds_heavy_uses_the_last_oob_idle_time() -> None:
    h = IdleHistogram(range_s=3600.0)
    for idle_s in (600.0, 5000.0, 700.0, 8000.0, 10_000.0):
        h.record(idle_s)
    assert h.oob_share == pytest.approx(0.6) and h.pattern is Pattern.OUT_OF_BOUNDS
    w = h.window()
    assert w.prewarm_s == pytest.approx(10_000 * 0.85)
    assert w.prewarm_s + w.keep_alive_s == pytest.approx(10_000 * 1.15)


def test_the_histogram_is_bounded() -> None:
    h = IdleHistogram()
    for k in range(100_000):
        h.record((k * 7919.0) % 20_000.0)
    assert len(h.bins) == 240  # 4 h of 1-minute bins
    assert sum(h.bins) + h.oob == 100_000
    assert all(not isinstance(v, list) or v is h.bins for v in vars(h).values())


def test_fluid_face_unloads_in_the_gap_and_prewarms_before_the_burst() -> None:
    demand = from_series(*_series(), span_s=BURSTS * PERIOD)
    hybrid = simulate(demand, HybridHistogramPolicy(), start_delay=2.0)
    fixed = simulate(demand, KeepAlivePolicy(keep_alive_s=600.0), start_delay=2.0)
    # A burst finding no ready allocation loses its first 2 s (the start delay) at 1 rps.
    # The 1,740 s gap outlives a 10-minute keep-alive: every burst starts cold.
    assert fixed.cold_starts == BURSTS and fixed.ledger.violation_requests == 2 * BURSTS
    # The hybrid: the first burst only. (The simulator counts every start from zero as a
    # cold start, pre-warms included; a warm burst is one with nothing unserved.)
    assert hybrid.ledger.violation_requests == 2
    counts = dict(hybrid.counts())
    # Learned after 5 idle times (bursts 1-5): from the 6th gap on, unloaded mid-gap and loaded
    # again before the burst (pre-warm 29 x 60 x 0.9 = 1,566 s after the burst ends).
    for k in range(5, BURSTS - 1):
        assert counts[k * PERIOD + 600.0] == 0
        assert counts[(k + 1) * PERIOD - 10.0] == 1
    # Before it learned, the standard keep-alive (the 4 h range) kept it loaded.
    assert counts[2 * PERIOD + 600.0] == 1
    standard = simulate(demand, KeepAlivePolicy(keep_alive_s=14_400.0), start_delay=2.0)
    assert hybrid.metrics.allocation_hours < standard.metrics.allocation_hours


def _series() -> tuple[list[float], list[float]]:
    times: list[float] = []
    values: list[float] = []
    for k in range(BURSTS):
        times += [k * PERIOD, k * PERIOD + BURST]
        values += [1.0, 0.0]
    return times, values


def test_fluid_face_scales_with_demand_like_keep_alive() -> None:
    demand = from_series([0.0, 100.0, 200.0], [25.0, 5.0, 0.0], span_s=400.0)
    policy = HybridHistogramPolicy(per_alloc_rps=10.0, max=2)
    result = simulate(demand, policy, per_alloc_rps=10.0)
    assert dict(result.counts())[50.0] == 2  # ceil(25 / 10) = 3, capped at 2
    assert dict(result.counts())[150.0] == 2  # never down while there is demand


def test_faas_face_learns_the_period() -> None:
    arrivals = [k * PERIOD for k in range(BURSTS)]
    service = TraceService([BURST] * BURSTS)
    until = BURSTS * PERIOD
    hybrid = simulate_faas(arrivals, service, HybridKeepAlive(), until_s=until)
    fixed = simulate_faas(arrivals, service, 600.0, until_s=until)
    standard = simulate_faas(arrivals, service, 14_400.0, until_s=until)
    assert fixed.cold_starts == BURSTS and standard.cold_starts == 1
    assert hybrid.cold_starts == 1 and hybrid.prewarms == BURSTS - 5
    # Loaded from 1,566 s into each learned gap (the arrival at 1,740 s) instead of all of it.
    assert hybrid.idle_instance_s < standard.idle_instance_s - 5 * 1000.0
