"""The simulator's error against a live trajectory: step functions compared exactly."""

from __future__ import annotations

import pytest

from actors.experiments.core.live_compare import actions, compare


def test_identical_trajectories_have_no_error() -> None:
    points = [(0.0, 2), (100.0, 5), (250.0, 1)]
    error = compare(points, points, 400)
    assert error.mean_abs_count_error == 0 and error.time_share_differing == 0
    assert error.live_actions == error.sim_actions == 2
    assert error.allocation_hours_error == 0
    assert error.sim_allocation_hours == pytest.approx((2 * 100 + 5 * 150 + 1 * 150) / 3600)


def test_a_late_scale_up_counts_its_lag_and_size() -> None:
    sim = [(0.0, 2), (100.0, 6)]
    live = [(0.0, 2), (130.0, 6)]  # 30 s late, 4 allocations short meanwhile
    error = compare(live, sim, 200)
    assert error.time_share_differing == pytest.approx(30 / 200)
    assert error.mean_abs_count_error == pytest.approx(4 * 30 / 200)
    assert error.max_abs_count_error == 4
    assert error.allocation_hours_error == pytest.approx(-120 / (2 * 100 + 6 * 100))


def test_points_are_sorted_clipped_and_the_last_of_a_time_wins() -> None:
    live = [(500.0, 9), (50.0, 3), (0.0, 1), (50.0, 4), (-2.0, 1)]
    error = compare(live, [(0.0, 1)], 100)
    assert error.mean_abs_count_error == pytest.approx(3 * 50 / 100)
    assert error.live_actions == 1
    assert actions([(0, 1), (5, 1), (9, 2)]) == 1
    with pytest.raises(ValueError):
        compare([], [(0.0, 1)], 10)
