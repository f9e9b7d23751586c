"""The scale-per-request mode on hand-checked runs: one request per instance, newest idle
instance first, keep-alive expiry (ties go to the expiry), rejections at max concurrency,
pre-warms, time-weighted means, a bounded trajectory, determinism and Little's law."""

from __future__ import annotations

import pytest

from actors.experiments.core.faas import (
    ExpService,
    FixedKeepAlive,
    Poisson,
    TraceService,
    Window,
    simulate_faas,
)


def trace(durations: list[float], penalty: float = 0.0) -> TraceService:
    return TraceService(durations, cold_penalty_s=penalty)


def test_two_overlapping_requests_need_two_instances() -> None:
    r = simulate_faas([0.0, 1.0], trace([5.0, 5.0]), 600.0, until_s=10.0, memory_mb=512)
    assert (r.requests, r.cold_starts, r.instances_created) == (2, 2, 2)
    # Instances: [0, 10) and [1, 10) -> 19 instance-s; running [0, 5) and [1, 6) -> 10.
    assert r.mean_instances == pytest.approx(1.9) and r.mean_running == pytest.approx(1.0)
    assert r.idle_instance_s == pytest.approx(9.0) and r.mean_idle == pytest.approx(0.9)
    assert r.idle_mb_s == pytest.approx(9 * 512) and r.idle_gb_s == pytest.approx(4.5)
    assert r.mean_lifespan_s is None  # both alive at the end


def test_a_request_after_the_keep_alive_is_cold() -> None:
    # 0: cold, idle from 1 (expires 51); 20: warm, idle from 21 (expires 71).
    warm = simulate_faas([0.0, 20.0, 70.0], trace([1.0] * 3), 50.0, until_s=100.0)
    assert warm.cold_starts == 1
    after = simulate_faas([0.0, 20.0, 71.5], trace([1.0] * 3), 50.0, until_s=100.0)
    assert after.cold_starts == 2 and after.p_cold == pytest.approx(2 / 3)
    # A request exactly at the expiry finds the instance gone, as in SimFaaS.
    tie = simulate_faas([0.0, 20.0, 71.0], trace([1.0] * 3), 50.0, until_s=100.0)
    assert tie.cold_starts == 2 and tie.mean_lifespan_s == pytest.approx(71.0)
    # The cold-start penalty lengthens the first request only.
    slow = simulate_faas([0.0, 20.0], trace([1.0, 1.0], penalty=4.0), 50.0, until_s=30.0)
    assert slow.mean_running == pytest.approx(6.0 / 30.0)


def test_the_newest_idle_instance_serves_first() -> None:
    # A (0) and B (0.5) are idle from 2 and 2.5; keep-alive 20. At 10 the newest (B) serves,
    # so A expires at 22 (lifespan 22) and B, used again at 25, at 46 (lifespan 45.5). Had the
    # oldest served, the lifespans would be 46 and 22 (mean 34).
    arrivals = [0.0, 0.5, 10.0, 25.0]
    r = simulate_faas(arrivals, trace([2.0, 2.0, 1.0, 1.0]), 20.0, until_s=100.0)
    assert r.cold_starts == 2
    assert r.mean_lifespan_s == pytest.approx((22.0 + 45.5) / 2)


def test_rejections_at_max_concurrency() -> None:
    r = simulate_faas([0.0, 1.0, 2.0, 12.0], trace([10.0] * 4), 600.0, max_concurrency=2)
    assert (r.requests, r.rejections, r.cold_starts) == (4, 1, 2)
    assert r.p_reject == pytest.approx(0.25) and r.p_cold == pytest.approx(0.5)
    assert r.until_s == 12.0  # a given sequence runs to its last arrival by default


class Prewarm:
    """A fixed pre-warm of 50 s, then 20 s loaded."""

    def on_arrival(self, now: float, idle_since: float | None) -> None:
        return None

    def on_idle(self, now: float, running: int) -> Window:
        return Window(50.0, 20.0)


def test_a_prewarm_unloads_then_loads_one_instance_again() -> None:
    # 0: cold, ends 1, unloaded; loaded at 51 until 71; 60 is warm.
    r = simulate_faas([0.0, 60.0], trace([1.0, 1.0]), Prewarm(), until_s=200.0)
    assert (r.cold_starts, r.prewarms, r.instances_created) == (1, 2, 3)
    # Loaded [0, 1) and [51, 61 + 50 unloaded at once): the second request ends at 61 and
    # unloads it again; the next pre-warm (at 111) lives until 131.
    assert r.mean_instances == pytest.approx((1 + 10 + 20) / 200.0)
    # An arrival before the pre-warm cancels it and is cold.
    early = simulate_faas([0.0, 30.0], trace([1.0, 1.0]), Prewarm(), until_s=40.0)
    assert (early.cold_starts, early.prewarms) == (2, 0)


def test_same_seed_same_run_and_the_trajectory_is_bounded() -> None:
    def run(seed: int) -> object:
        return simulate_faas(
            Poisson(0.9), ExpService(1.991, 2.244), 60.0, until_s=20_000.0, seed=seed
        )

    assert run(3) == run(3) and run(3) != run(4)
    r = simulate_faas(
        Poisson(0.9), ExpService(2.0, 2.5), 60.0, until_s=20_000.0, trajectory_step_s=100.0
    )
    assert len(r.trajectory) == 200 and r.trajectory_step_s == 100.0
    assert sum(r.trajectory) * 100.0 / 20_000.0 == pytest.approx(r.mean_instances)
    assert len(simulate_faas(Poisson(0.9), ExpService(2, 2), until_s=1e6).trajectory) == 1000


def test_littles_law_on_mean_running() -> None:
    lam, warm, cold = 0.9, 1.991, 2.244
    r = simulate_faas(Poisson(lam), ExpService(warm, cold), 600.0, until_s=200_000.0, seed=7)
    mean_service = (1 - r.p_cold) * warm + r.p_cold * cold
    assert r.mean_running == pytest.approx(lam * mean_service, rel=0.02)
    assert r.mean_instances == pytest.approx(r.mean_running + r.mean_idle)


def test_fixed_keep_alive_object_equals_seconds() -> None:
    a = simulate_faas(Poisson(0.5), ExpService(1, 2), FixedKeepAlive(30.0), until_s=5000.0)
    b = simulate_faas(Poisson(0.5), ExpService(1, 2), 30.0, until_s=5000.0)
    assert a == b


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="needs until_s"):
        simulate_faas(Poisson(1.0), ExpService(1, 1))
    with pytest.raises(ValueError, match="sorted"):
        simulate_faas([1.0, 0.0], ExpService(1, 1))
    with pytest.raises(ValueError, match="fewer durations"):
        simulate_faas([0.0, 1.0], trace([1.0]))
    with pytest.raises(ValueError, match="Poisson"):
        simulate_faas(Poisson(1.0), trace([1.0]), until_s=10.0)
    with pytest.raises(ValueError, match="max_concurrency"):
        simulate_faas([0.0], trace([1.0]), until_s=1.0, max_concurrency=0)
    with pytest.raises(ValueError, match="at most"):
        simulate_faas([0.0], trace([1.0]), until_s=1e9, trajectory_step_s=1.0)
