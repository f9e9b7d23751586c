"""bench.replica at a small scale: the recorded log holds every placement and its running
report, replaying it yields the placements the scheduler made, and the figures are medians
of the repeats with the job-scoped store's settle counted in its total."""

from __future__ import annotations

import statistics

import pytest

from actors.state import StateStore
from bench.replica import record_log, run
from contracts.state_log import decode_entry


def test_replayed_log_holds_every_placement_and_report() -> None:
    result = run(nodes=20, jobs=4, count=10, repeat=1)
    assert result["allocs"] == 40 and result["client_updates"] == 40
    assert result["decode_us_per_alloc"] > 0 and result["apply_us_per_alloc"] > 0
    assert result["fast_decode_fallbacks"] == 0  # our own log never leaves the fast path

    replica = StateStore()
    for raw in record_log(20, 4, 10):
        replica.apply(decode_entry(raw))
    allocs = list(replica.allocs())
    assert len(allocs) == 40
    assert {a.client_status.value for a in allocs} == {"running"}


def test_figures_are_the_medians_of_the_repeats() -> None:
    result = run(nodes=20, jobs=4, count=10, repeat=3)
    assert result["repeat"] == 3
    eager, scoped = result["runs_total_us_per_alloc"], result["job_scoped_runs_total_us_per_alloc"]
    assert len(eager) == len(scoped) == 3
    assert result["total_us_per_alloc"] == statistics.median(eager)
    assert result["job_scoped_total_us_per_alloc"] == statistics.median(scoped)


def test_the_job_scoped_total_counts_the_settle() -> None:
    # The settle builds and files every record the compact replay deferred: a follower
    # pays it, so a run's total is its decode, apply and settle.
    result = run(nodes=20, jobs=4, count=10, repeat=1)
    parts = [result[f"job_scoped_{p}_us_per_alloc"] for p in ("decode", "apply", "settle")]
    assert all(part > 0 for part in parts)
    assert result["job_scoped_total_us_per_alloc"] == pytest.approx(sum(parts), abs=0.05)
